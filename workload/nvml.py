"""What NVML says about the node's GPUs: driver, count, uncorrectable ECC and row remapping, Xid events.

``pynvml`` (nvidia-ml-py, a dependency of vLLM) is imported when the program starts, the way any
program imports it, so a test can stand a fake module in for it (tests/workload/fake_nvml.py).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError, when the module does not name it


def load() -> ModuleType:
    return importlib.import_module("pynvml")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def error_text(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


@dataclass
class GpuHealth:
    """Counters of one GPU at one moment; None where NVML does not support the counter on this GPU."""

    index: int
    name: str
    uuid: str
    uncorrectable_ecc: int | None = None  # volatile (since the driver loaded) uncorrected ECC errors
    ecc_unsupported: str | None = None
    remapped_uncorrectable: int | None = None  # rows remapped for uncorrectable errors
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    remap_unsupported: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid}


@dataclass
class XidWatch:
    """An NVML event set with every GPU registered for critical Xid events from the moment it was made."""

    nvml: ModuleType
    event_set: Any
    registered: list[int] = field(default_factory=list)
    unsupported: dict[int, str] = field(default_factory=dict)

    def drain(self, uuids: dict[str, int]) -> list[dict[str, Any]]:
        """Every queued Xid event: [{"gpu": index or None, "uuid": ..., "xid": n}], waiting for none."""
        wait = getattr(self.nvml, "nvmlEventSetWait_v2", None) or self.nvml.nvmlEventSetWait
        timeout_code = getattr(self.nvml, "NVML_ERROR_TIMEOUT", 10)
        xid_type = getattr(self.nvml, "nvmlEventTypeXidCriticalError", XID_EVENT)
        events = []
        for _ in range(10_000):  # a bound, not a limit one expects to reach
            try:
                data = wait(self.event_set, 1)
            except self.nvml.NVMLError as error:
                if getattr(error, "value", None) == timeout_code:
                    break
                raise
            if not int(getattr(data, "eventType", 0)) & xid_type:
                continue
            uuid = None
            try:
                uuid = _text(self.nvml.nvmlDeviceGetUUID(data.device))
            except self.nvml.NVMLError:
                pass
            events.append({"gpu": uuids.get(uuid) if uuid else None, "uuid": uuid, "xid": int(data.eventData)})
        return events

    def close(self) -> None:
        try:
            self.nvml.nvmlEventSetFree(self.event_set)
        except self.nvml.NVMLError:
            pass


class Nvml:
    """An initialised NVML; ``shutdown()`` when done."""

    def __init__(self, module: ModuleType) -> None:
        self.m = module
        self.m.nvmlInit()

    def driver_version(self) -> str:
        return _text(self.m.nvmlSystemGetDriverVersion())

    def count(self) -> int:
        return int(self.m.nvmlDeviceGetCount())

    def _unsupported(self, error: Exception) -> bool:
        return getattr(error, "value", None) == getattr(self.m, "NVML_ERROR_NOT_SUPPORTED", 3)

    def health(self) -> list[GpuHealth]:
        found = []
        for index in range(self.count()):
            handle = self.m.nvmlDeviceGetHandleByIndex(index)
            gpu = GpuHealth(index, _text(self.m.nvmlDeviceGetName(handle)), _text(self.m.nvmlDeviceGetUUID(handle)))
            try:
                gpu.uncorrectable_ecc = int(self.m.nvmlDeviceGetTotalEccErrors(
                    handle, getattr(self.m, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                    getattr(self.m, "NVML_VOLATILE_ECC", 0)))
            except self.m.NVMLError as error:
                if not self._unsupported(error):
                    raise
                gpu.ecc_unsupported = error_text(error)  # ECC off (many L40S, T4 by choice) or no ECC memory
            try:
                _corrected, uncorrected, pending, failure = self.m.nvmlDeviceGetRemappedRows(handle)
                gpu.remapped_uncorrectable = int(uncorrected)
                gpu.remap_pending, gpu.remap_failure = bool(pending), bool(failure)
            except self.m.NVMLError as error:
                if not self._unsupported(error):
                    raise
                gpu.remap_unsupported = error_text(error)  # row remapping exists from Ampere on
            found.append(gpu)
        return found

    def watch_xid(self) -> XidWatch:
        xid_type = getattr(self.m, "nvmlEventTypeXidCriticalError", XID_EVENT)
        watch = XidWatch(self.m, self.m.nvmlEventSetCreate())
        for index in range(self.count()):
            handle = self.m.nvmlDeviceGetHandleByIndex(index)
            try:
                self.m.nvmlDeviceRegisterEvents(handle, xid_type, watch.event_set)
                watch.registered.append(index)
            except self.m.NVMLError as error:
                watch.unsupported[index] = error_text(error)
        return watch

    def shutdown(self) -> None:
        try:
            self.m.nvmlShutdown()
        except self.m.NVMLError:
            pass
