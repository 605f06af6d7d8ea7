"""Fixtures for the live checks: a fake API on loopback seeded from an example stack, and an adapter
connected to it through a real kubeconfig file (tests/fakekube/plugin.py)."""

from tests.fakekube.plugin import eks, eks_spec, fake, kube, kubeconfig, prod, prod_spec  # noqa: F401
