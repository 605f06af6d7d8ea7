"""Which Pulumi project a verb works on, decided before anything heavy is imported (the Pulumi SDK, the
cluster client): the current folder when it is one, else the checkout gpu-rollout runs from."""

from __future__ import annotations

from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent.parent  # the checkout gpu-rollout runs from
PROJECT_FILE = "Pulumi.yaml"


def default_project_dir() -> Path:
    """The Pulumi project a verb reads: the current folder when it is one, else the checkout gpu-rollout runs
    from (so `gpu-rollout plan --stack prod` works from anywhere in a checkout's shell)."""
    for candidate in (Path.cwd(), SOURCE_DIR):
        if (candidate / PROJECT_FILE).is_file():
            return candidate
    return Path.cwd()
