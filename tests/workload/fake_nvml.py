"""A fake NVML: a module object with the pynvml functions and constants the validation program calls.

The program imports ``pynvml`` like any program does; a test stands this module in for it
(``sys.modules["pynvml"]`` in process, or ``tests/workload/fakenvml`` first on ``PYTHONPATH`` for a
subprocess, which reads its scenario from ``$FAKE_NVML``). What the fake knows is only what a GPU node
would show: a driver version, GPUs with names and UUIDs, ECC and row-remap counters, and Xid events,
delivered to the event sets that registered the GPU before the event happened (as NVML does).
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass, field
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIBRARY_NOT_FOUND = 12
XID_CRITICAL_ERROR = 0x8


class NVMLError(Exception):
    """As pynvml's: ``value`` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeGpu:
    name: str = "NVIDIA L40S"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    ecc_uncorrected: int | None = 0  # None: ECC not supported (or off)
    remapped_correctable: int | None = 0  # None: row remapping not supported (before Ampere)
    remapped_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    events_supported: bool = True
    lost: bool = False


@dataclass
class EventData:
    device: Any
    eventType: int  # noqa: N815 - pynvml's field names
    eventData: int  # noqa: N815


@dataclass
class _EventSet:
    registered: set[str] = field(default_factory=set)
    queue: list[EventData] = field(default_factory=list)


class FakeNvml:
    def __init__(self, driver: str = "580.173.02", gpus: list[FakeGpu] | None = None,
                 init_error: int | None = None) -> None:
        self.driver = driver
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.init_error = init_error
        self.initialised = False
        self.event_sets: list[_EventSet] = []
        self.lock = threading.Lock()
        self.calls: list[str] = []

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> FakeNvml:
        return cls(document.get("driver", "580.173.02"), [FakeGpu(**g) for g in document.get("gpus", [{}])],
                   document.get("initError"))

    @classmethod
    def uniform(cls, count: int, driver: str = "580.173.02", **gpu: Any) -> FakeNvml:
        return cls(driver, [FakeGpu(uuid=f"GPU-{i:08d}-aaaa-bbbb-cccc-000000000000", **gpu) for i in range(count)])

    # ------------------------------------------------------------ what happens on the node

    def xid(self, index: int, code: int) -> None:
        """A critical Xid on GPU ``index``: queued on every event set that registered it."""
        gpu = self.gpus[index]
        with self.lock:
            for event_set in self.event_sets:
                if gpu.uuid in event_set.registered:
                    event_set.queue.append(EventData(gpu, XID_CRITICAL_ERROR, code))

    def uncorrectable_ecc(self, index: int, count: int = 1) -> None:
        gpu = self.gpus[index]
        assert gpu.ecc_uncorrected is not None
        gpu.ecc_uncorrected += count

    def row_remap_failure(self, index: int) -> None:
        self.gpus[index].remap_failure = True

    # ------------------------------------------------------------ the pynvml surface

    def _live(self) -> list[FakeGpu]:
        return [g for g in self.gpus if not g.lost]

    def _check(self) -> None:
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _device(self, handle: Any) -> FakeGpu:
        self._check()
        if not isinstance(handle, FakeGpu):
            raise TypeError(f"not a device handle: {handle!r}")
        if handle.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return handle

    def module(self) -> types.ModuleType:  # noqa: C901 - one flat closure per NVML call the fake serves
        fake = self
        module = types.ModuleType("pynvml", "fake NVML (tests/workload/fake_nvml.py)")

        def nvmlInit() -> None:  # noqa: N802 - pynvml's names
            fake.calls.append("nvmlInit")
            if fake.init_error is not None:
                raise NVMLError(fake.init_error)
            fake.initialised = True

        def nvmlShutdown() -> None:  # noqa: N802
            fake.calls.append("nvmlShutdown")
            fake._check()
            fake.initialised = False

        def nvmlSystemGetDriverVersion() -> str:  # noqa: N802
            fake._check()
            return fake.driver

        def nvmlDeviceGetCount() -> int:  # noqa: N802
            fake._check()
            return len(fake._live())

        def nvmlDeviceGetHandleByIndex(index: int) -> FakeGpu:  # noqa: N802
            fake._check()
            live = fake._live()
            if not 0 <= index < len(live):
                raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT
            return live[index]

        def nvmlDeviceGetName(handle: Any) -> str:  # noqa: N802
            return fake._device(handle).name

        def nvmlDeviceGetUUID(handle: Any) -> str:  # noqa: N802
            return fake._device(handle).uuid

        def nvmlDeviceGetTotalEccErrors(handle: Any, error_type: int, counter_type: int) -> int:  # noqa: N802
            gpu = fake._device(handle)
            assert (error_type, counter_type) == (1, 0), "the program asks for volatile uncorrected errors"
            if gpu.ecc_uncorrected is None:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            return gpu.ecc_uncorrected

        def nvmlDeviceGetRemappedRows(handle: Any) -> tuple[int, int, int, int]:  # noqa: N802
            gpu = fake._device(handle)
            if gpu.remapped_correctable is None:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            return gpu.remapped_correctable, gpu.remapped_uncorrectable, int(gpu.remap_pending), int(gpu.remap_failure)

        def nvmlEventSetCreate() -> _EventSet:  # noqa: N802
            fake._check()
            event_set = _EventSet()
            with fake.lock:
                fake.event_sets.append(event_set)
            return event_set

        def nvmlDeviceRegisterEvents(handle: Any, event_types: int, event_set: _EventSet) -> None:  # noqa: N802
            gpu = fake._device(handle)
            assert event_types & XID_CRITICAL_ERROR
            if not gpu.events_supported:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            event_set.registered.add(gpu.uuid)

        def nvmlEventSetWait_v2(event_set: _EventSet, timeout_ms: int) -> EventData:  # noqa: N802
            fake._check()
            with fake.lock:
                if event_set.queue:
                    return event_set.queue.pop(0)
            raise NVMLError(NVML_ERROR_TIMEOUT)

        def nvmlEventSetFree(event_set: _EventSet) -> None:  # noqa: N802
            with fake.lock:
                if event_set in fake.event_sets:
                    fake.event_sets.remove(event_set)

        for function in (nvmlInit, nvmlShutdown, nvmlSystemGetDriverVersion, nvmlDeviceGetCount,
                         nvmlDeviceGetHandleByIndex, nvmlDeviceGetName, nvmlDeviceGetUUID, nvmlDeviceGetTotalEccErrors,
                         nvmlDeviceGetRemappedRows, nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2,
                         nvmlEventSetFree):
            setattr(module, function.__name__, function)
        module.NVMLError = NVMLError
        module.NVML_SUCCESS = NVML_SUCCESS
        module.NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
        module.NVML_ERROR_TIMEOUT = NVML_ERROR_TIMEOUT
        module.NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
        module.NVML_VOLATILE_ECC = 0
        module.nvmlEventTypeXidCriticalError = XID_CRITICAL_ERROR
        return module
