"""The fake API on loopback and its adapter (tests/fakekube/plugin.py), and a loopback webhook receiver."""

from tests.announcements.receiver import receiver  # noqa: F401
from tests.fakekube.plugin import fake, kube, kubeconfig  # noqa: F401
