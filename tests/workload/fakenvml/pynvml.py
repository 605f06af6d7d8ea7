"""``pynvml`` for a validation program run as a subprocess: the fake NVML, its scenario from ``$FAKE_NVML``
(JSON: driver, gpus, initError; see tests/workload/fake_nvml.py). Put this folder first on PYTHONPATH."""

import json
import os
import sys

from tests.workload.fake_nvml import FakeNvml

sys.modules[__name__] = FakeNvml.from_json(json.loads(os.environ.get("FAKE_NVML", "{}"))).module()
