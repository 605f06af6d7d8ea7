"""gpu_knowledge.labels: every label, annotation, taint and tag key, and the upgrade controller's states and the
whole-GPU MIG layout, spelled there and nowhere else in product source (workload/, shipped alone, keeps its own)."""

from __future__ import annotations

from gpu_knowledge import labels
from tests.vocabulary.spellings import stray, unexplained

HOME = "gpu_knowledge/labels.py"


def _words() -> set[str]:
    """The keys (each has a domain: '/', '.' or the tag prefix) and the values that name nothing else."""
    found: set[str] = set()
    for name, value in vars(labels).items():
        if not name.isupper():
            continue
        for item in value if isinstance(value, tuple) else (value,):
            for word in item if isinstance(item, tuple) else (item,):
                if isinstance(word, str) and ("/" in word or "." in word or word.startswith(labels.TAG_PREFIX)):
                    found.add(word)
    return found | {labels.UPGRADE_REQUIRED, labels.UPGRADE_DONE, labels.UPGRADE_FAILED, *labels.UPGRADE_IN_PROGRESS,
                    labels.MIG_CONFIG_DISABLED}


def test_the_words_searched_for_include_the_strays_of_issue_29() -> None:
    assert {"nvidia.com/gpu.product", "upgrade-done", "all-disabled", "gpu-driver-upgrade.io/pool"} <= _words()


def test_no_product_module_spells_a_label_key_or_state_outside_labels_py() -> None:
    found = stray(_words(), {HOME})
    left, _ = unexplained(found, {})
    assert left == [], f"use gpu_knowledge.labels: {left}"
