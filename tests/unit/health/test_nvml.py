"""NVML behind one interface: the simulated device-state file, and the real pynvml path against a stand-in module."""

import types
from pathlib import Path

import pytest

from chaos.health.nvml import RealNvml, SimulatedNvml, inject_sim_xid, init_sim_state, set_sim_state
from chaos.health.sources import SourceUnavailable


def test_simulated_events_are_followed_from_open_and_bump_ecc(tmp_path: Path) -> None:
    path = str(tmp_path / "nvml.json")
    init_sim_state(path, 2)
    inject_sim_xid(path, 0, 13)  # before open: not reported
    nvml = SimulatedNvml(path, sleep=lambda s: None)
    assert nvml.wait_xid(0.0) == []
    inject_sim_xid(path, 1, 92)
    inject_sim_xid(path, 1, 48)
    seen = nvml.wait_xid(0.0)
    assert [(s.code, s.device, s.bus_id) for s in seen] == [(92, 1, "0000:0f:00"), (48, 1, "0000:0f:00")]
    state = nvml.state(1)
    assert (state.ecc_corrected, state.ecc_uncorrected) == (64, 1)
    set_sim_state(path, 1, temperature_c=91, throttle_reasons=["HwThermalSlowdown"])
    assert nvml.state(1).temperature_c == 91
    with pytest.raises(ValueError, match="no device 5"):
        inject_sim_xid(path, 5, 79)


def test_simulated_backend_without_its_state_file_says_who_creates_it(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="sink: nvml"):
        SimulatedNvml(str(tmp_path / "missing.json"))


class _Err(Exception):
    pass


class _Timeout(_Err):
    pass


def _fake_pynvml(events: list) -> types.SimpleNamespace:
    """The subset of pynvml the real backend calls, with two GPUs and a queue of events."""
    handles = ["h0", "h1"]
    buses = {"h0": b"00000000:07:00.0", "h1": b"00000000:C1:00.0"}

    def wait(_set, _ms):
        if not events:
            raise _Timeout("timeout")
        return events.pop(0)

    def ecc(h, kind, _counter):
        if h == "h1":
            raise _Err("Not Supported")
        return 5 if kind == "corr" else 0

    return types.SimpleNamespace(
        NVMLError=_Err, NVMLError_Timeout=_Timeout, NVML_TEMPERATURE_GPU=0, NVML_VOLATILE_ECC=0,
        NVML_MEMORY_ERROR_TYPE_CORRECTED="corr", NVML_MEMORY_ERROR_TYPE_UNCORRECTED="unc",
        nvmlEventTypeXidCriticalError=8, nvmlEventTypeDoubleBitEccError=2,
        nvmlClocksThrottleReasonHwSlowdown=8, nvmlClocksThrottleReasonAll=0xFF, nvmlClocksThrottleReasonNone=0,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: handles[i],
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=buses[h]),
        nvmlEventSetCreate=lambda: "set", nvmlEventSetFree=lambda s: None,
        nvmlDeviceRegisterEvents=lambda h, mask, s: None, nvmlEventSetWait_v2=wait,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200", nvmlDeviceGetTemperature=lambda h, s: 44,
        nvmlDeviceGetTotalEccErrors=ecc, nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 8,
    )


def test_real_backend_maps_events_to_devices_and_reports_unsupported_as_none() -> None:
    events = [types.SimpleNamespace(device="h1", eventType=8, eventData=79),
              types.SimpleNamespace(device="h0", eventType=2, eventData=0)]
    nvml = RealNvml(_fake_pynvml(events))
    assert nvml.bus_ids == ["0000:07:00", "0000:c1:00"]
    assert [(s.code, s.device, s.bus_id) for s in nvml.wait_xid(0.01)] == [(79, 1, "0000:c1:00")]
    assert [(s.code, s.device) for s in nvml.wait_xid(0.01)] == [(48, 0)]  # a double-bit ECC event
    assert nvml.wait_xid(0.01) == []  # NVML's timeout is "nothing happened"
    s0, s1 = nvml.state(0), nvml.state(1)
    assert (s0.name, s0.temperature_c, s0.ecc_corrected, s0.throttle_reasons) == ("NVIDIA H200", 44, 5, ["HwSlowdown"])
    assert s1.ecc_corrected is None
