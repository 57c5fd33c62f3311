"""NVML device state and XID events: real pynvml on a GPU machine, a simulated device-state file elsewhere, one interface.

NVML cannot *inject* an XID: on a GPU machine the real backend only reads real events and state;
the harness injects through the simulated state file, /dev/kmsg or DCGM instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Protocol

from chaos.health.sighting import Sighting, SourceUnavailable
from chaos.health.xidline import bus_id_for, normalise_bus_id

# ECC counters an XID bumps in the simulated state (what the real counters do on such an event).
_ECC_BUMP = {48: ("uncorrected", 1), 94: ("uncorrected", 1), 63: ("corrected", 8), 92: ("corrected", 64)}


@dataclass
class DeviceState:
    """What an operator reads off one GPU (``nvidia-smi -q`` in short)."""

    index: int
    bus_id: str
    name: str = "simulated GPU"
    temperature_c: int | None = 40
    ecc_corrected: int | None = 0
    """Volatile single-bit (corrected) ECC errors; None where the card has no ECC."""
    ecc_uncorrected: int | None = 0
    """Volatile double-bit (uncorrected) ECC errors."""
    throttle_reasons: list[str] = field(default_factory=list)


class Nvml(Protocol):
    kind: str

    def device_count(self) -> int: ...

    def state(self, index: int) -> DeviceState: ...

    def wait_xid(self, timeout_s: float) -> list[Sighting]:
        """XID events since the last call (starting from when the backend opened), waiting up to ``timeout_s``."""

    def close(self) -> None: ...


# --------------------------------------------------------------------------------------- real


def _throttle_names(pynvml: Any, mask: int) -> list[str]:
    prefix = "nvmlClocksThrottleReason"
    names = []
    for attr in dir(pynvml):
        if attr.startswith(prefix) and attr not in (prefix + "All", prefix + "None"):
            bit = getattr(pynvml, attr)
            if isinstance(bit, int) and bit and mask & bit == bit:
                names.append(attr[len(prefix):])
    return sorted(set(names))


class RealNvml:
    """pynvml (package nvidia-ml-py): device state, and XID / double-bit ECC events from an NVML event set."""

    kind = "nvml"

    def __init__(self, pynvml: Any = None) -> None:
        if pynvml is None:
            try:
                import pynvml  # type: ignore[no-redef]
            except ImportError:
                raise SourceUnavailable("pynvml is not installed: pip install nvidia-ml-py") from None
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise SourceUnavailable(f"NVML is not usable here ({exc}): needs an NVIDIA driver "
                                    f"(libnvidia-ml.so) and a GPU") from None
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self.bus_ids = [self._bus_id(h) for h in self.handles]
        self.unregistered: dict[int, str] = {}
        """Devices whose events could not be registered, with NVML's reason."""
        self._set = pynvml.nvmlEventSetCreate()
        mask = pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError
        for i, h in enumerate(self.handles):
            try:
                pynvml.nvmlDeviceRegisterEvents(h, mask, self._set)
            except pynvml.NVMLError as exc:
                self.unregistered[i] = str(exc)

    def _bus_id(self, handle: Any) -> str:
        raw = self.nv.nvmlDeviceGetPciInfo(handle).busId
        raw = raw.decode() if isinstance(raw, bytes) else raw
        return normalise_bus_id(raw) or raw

    def device_count(self) -> int:
        return len(self.handles)

    def _try(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nv.NVMLError:  # NotSupported on cards without ECC or a sensor: report None
            return None

    def state(self, index: int) -> DeviceState:
        nv, h = self.nv, self.handles[index]
        name = self._try(nv.nvmlDeviceGetName, h)
        mask = self._try(nv.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        return DeviceState(
            index=index, bus_id=self.bus_ids[index],
            name=name.decode() if isinstance(name, bytes) else str(name),
            temperature_c=self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            ecc_corrected=self._try(nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                    nv.NVML_VOLATILE_ECC),
            ecc_uncorrected=self._try(nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                      nv.NVML_VOLATILE_ECC),
            throttle_reasons=_throttle_names(nv, mask) if mask is not None else [],
        )

    def wait_xid(self, timeout_s: float) -> list[Sighting]:
        nv = self.nv
        try:
            data = nv.nvmlEventSetWait_v2(self._set, max(1, int(timeout_s * 1000)))
        except nv.NVMLError as exc:
            if isinstance(exc, getattr(nv, "NVMLError_Timeout", ())):
                return []
            raise
        bus = self._bus_id(data.device)
        index = self.bus_ids.index(bus) if bus in self.bus_ids else None
        if data.eventType == nv.nvmlEventTypeDoubleBitEccError:
            code, raw = 48, "NVML event: double-bit ECC error"
        else:
            code, raw = int(data.eventData), f"NVML event: XID {int(data.eventData)}"
        return [Sighting("nvml", code, bus, index, raw)]

    def close(self) -> None:
        try:
            self.nv.nvmlEventSetFree(self._set)
        finally:
            self.nv.nvmlShutdown()


# ---------------------------------------------------------------------------------- simulated


@contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _read_state(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _write_state(path: str, state: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh, indent=1)
    os.replace(tmp, path)  # readers see the old or the new state, never half of one


def init_sim_state(path: str, devices: int) -> None:
    """Create the simulated NVML state: ``devices`` healthy GPUs at the simulated bus ids, no events."""
    with _locked(path):
        _write_state(path, {"devices": [asdict(DeviceState(i, bus_id_for(i))) for i in range(devices)],
                            "events": [], "seq": 0})


def inject_sim_xid(path: str, index: int, code: int) -> int:
    """Record XID ``code`` on simulated GPU ``index`` (bumping the ECC counters it implies); returns its sequence number."""
    with _locked(path):
        state = _read_state(path)
        devices = state["devices"]
        if not 0 <= index < len(devices):
            raise ValueError(f"simulated NVML has {len(devices)} device(s); no device {index}")
        counter, n = _ECC_BUMP.get(code, (None, 0))
        if counter is not None:
            devices[index][f"ecc_{counter}"] = (devices[index][f"ecc_{counter}"] or 0) + n
        state["seq"] += 1
        state["events"].append({"seq": state["seq"], "device": index, "code": code, "t": time.time()})
        _write_state(path, state)
        return state["seq"]


def set_sim_state(path: str, index: int, **fields: Any) -> None:
    """Change fields of simulated GPU ``index`` (temperature_c, throttle_reasons, ...)."""
    with _locked(path):
        state = _read_state(path)
        unknown = set(fields) - set(DeviceState.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown device field(s) {sorted(unknown)}; known: {sorted(DeviceState.__dataclass_fields__)}")
        state["devices"][index].update(fields)
        _write_state(path, state)


class SimulatedNvml:
    """A JSON device-state file standing in for NVML; events are followed from the newest one at open."""

    kind = "nvml-sim"

    def __init__(self, path: str, interval_s: float = 0.005, sleep=time.sleep) -> None:
        if not os.path.exists(path):
            raise SourceUnavailable(f"simulated NVML state {path} does not exist (the xid fault with sink: nvml "
                                    f"creates it before launch)")
        self.path = path
        self.interval_s = interval_s
        self.sleep = sleep
        self._stamp: tuple[int, int] | None = None
        self._seq = _read_state(path)["seq"]

    def device_count(self) -> int:
        return len(_read_state(self.path)["devices"])

    def state(self, index: int) -> DeviceState:
        return DeviceState(**_read_state(self.path)["devices"][index])

    def wait_xid(self, timeout_s: float) -> list[Sighting]:
        deadline = time.monotonic() + timeout_s
        while True:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_mtime_ns)
            if stamp != self._stamp:
                self._stamp = stamp
                state = _read_state(self.path)
                new = [e for e in state["events"] if e["seq"] > self._seq]
                if new:
                    self._seq = new[-1]["seq"]
                    return [Sighting("nvml", e["code"], state["devices"][e["device"]]["bus_id"], e["device"],
                                     f"simulated NVML event: XID {e['code']} on GPU {e['device']}") for e in new]
            if time.monotonic() >= deadline:
                return []
            self.sleep(self.interval_s)

    def close(self) -> None:
        """Nothing held open between reads."""


def open_nvml(state_path: str | None = None) -> Nvml:
    """The simulated backend for ``state_path``, else real NVML (SourceUnavailable, with the fix, where there is none)."""
    if state_path:
        return SimulatedNvml(state_path)
    return RealNvml()


class NvmlSource:
    """NVML events as a monitor source."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.name = nvml.kind

    def read(self, timeout_s: float) -> list[Sighting]:
        return self.nvml.wait_xid(timeout_s)

    def close(self) -> None:
        self.nvml.close()


def report(wait_s: float = 2.0, out: Any = sys.stdout) -> int:
    """Print every device's state and any XID event within ``wait_s``; the GPU check script runs this. 0: NVML worked, 2: no NVML here."""
    try:
        nvml = RealNvml()
    except SourceUnavailable as exc:
        print(f"NVML: unavailable: {exc}", file=out)
        return 2
    print(f"NVML: {nvml.device_count()} device(s)", file=out)
    for i in range(nvml.device_count()):
        print(f"  GPU {i}: {json.dumps(asdict(nvml.state(i)))}", file=out)
    for i, why in nvml.unregistered.items():
        print(f"  GPU {i}: XID/ECC events NOT registered: {why}", file=out)
    t0 = time.monotonic()
    seen = nvml.wait_xid(wait_s)
    print(f"NVML events: waited {time.monotonic() - t0:.2f} s for XID/DBE events, saw {len(seen)}: "
          f"{[s.raw for s in seen]}", file=out)
    nvml.close()
    return 0


if __name__ == "__main__":
    sys.exit(report(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0))
