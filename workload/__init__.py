"""The validation program that runs inside the cluster, on a node right after its driver upgrade.

It is shipped to the pod as a ConfigMap rendered from these very files (components/validation.py), so
what runs is what the tests test. It needs nothing beyond what a vLLM image has: the standard library
and ``pynvml`` (nvidia-ml-py). Entry point: ``python -m workload.validate --config FILE``.
docs/validation.md describes what it checks and the result it writes.
"""
