"""Which Pulumi project a verb works on, decided before anything heavy is imported (the Pulumi SDK, the
cluster client): as the Pulumi CLI finds it, the current folder or the nearest folder above it that holds
``Pulumi.yaml``; else the checkout gpu-rollout runs from. Reports say which, and how it was found."""

from __future__ import annotations

from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent.parent  # the checkout gpu-rollout runs from
PROJECT_FILE = "Pulumi.yaml"


def find_project() -> tuple[Path, str]:
    """The project folder a verb reads without --project-dir, and how it was found, in words."""
    here = Path.cwd()
    for candidate in (here, *here.parents):
        if (candidate / PROJECT_FILE).is_file():
            return candidate, "the current folder" if candidate == here else "the nearest folder above the current " \
                "one with Pulumi.yaml"
    if (SOURCE_DIR / PROJECT_FILE).is_file():
        return SOURCE_DIR, "the checkout gpu-rollout runs from: no Pulumi.yaml in or above the current folder"
    return here, "the current folder (it holds no Pulumi.yaml)"


def default_project_dir() -> Path:
    """The Pulumi project a verb reads: the current folder or the nearest one above it that is one, else the
    checkout gpu-rollout runs from (so `gpu-rollout plan --stack prod` works from anywhere in a checkout's
    shell)."""
    return find_project()[0]


def chosen_project_dir(given: Path | None) -> Path:
    """``--project-dir`` when it was given, else :func:`default_project_dir`: the one place a verb's project folder
    is chosen."""
    return given if given is not None else default_project_dir()
