"""Fixtures for the command line: the fake API on loopback and a kubeconfig reaching it
(tests/fakekube/plugin.py)."""

from tests.fakekube.plugin import eks, eks_spec, fake, kube, kubeconfig, prod, prod_spec  # noqa: F401
