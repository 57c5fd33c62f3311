"""The monitor: acts only on its own device, emits one health event per XID, and carries out the policy's action."""

import json
import time
from pathlib import Path

import pytest

from chaos.health.exclusions import read_exclusions
from chaos.health.monitor import APP_ERROR_EXIT, EXCLUDE_EXIT, Actuator, HealthMonitor, my_device, start_monitor
from chaos.health.sources import FileSource, Sighting
from chaos.health.xidline import bus_id_for, format_xid_line


class Exited(Exception):
    pass


def _monitor(tmp_path: Path, device: int = 1, rank: int = 1, sources=()):
    events, stops = [], []

    def exit_(code: int) -> None:
        raise Exited(code)

    act = Actuator(rank, str(tmp_path / "excluded_devices.json"), exit=exit_, stop_launcher=lambda: stops.append(1))
    mon = HealthMonitor(list(sources), device=device, rank=rank, actuator=act, emit=lambda **f: events.append(f))
    return mon, events, stops


def _sight(code: int, device: int) -> Sighting:
    return Sighting("file", code, bus_id_for(device), None, format_xid_line(code, bus_id_for(device)))


def test_xids_on_other_devices_are_left_to_their_rank(tmp_path: Path) -> None:
    mon, events, _ = _monitor(tmp_path, device=1)
    assert mon.handle(_sight(79, 0)) is None
    assert events == []


def test_application_xid_emits_then_exits_for_a_restart(tmp_path: Path) -> None:
    mon, events, stops = _monitor(tmp_path)
    with pytest.raises(Exited) as exc:
        mon.handle(_sight(13, 1))
    assert exc.value.args == (APP_ERROR_EXIT,)
    assert [(e["code"], e["device"], e["action"], e["bus_id"]) for e in events] == [(13, 1, "restart", "0000:0f:00")]
    assert stops == []  # a restart keeps the launch: torchrun restarts the ranks


def test_hardware_xid_records_the_device_stops_the_launch_and_exits(tmp_path: Path) -> None:
    mon, events, stops = _monitor(tmp_path)
    with pytest.raises(Exited) as exc:
        mon.handle(_sight(79, 1))
    assert exc.value.args == (EXCLUDE_EXIT,)
    assert stops == [1]
    [entry] = read_exclusions(tmp_path / "excluded_devices.json")
    assert (entry["device"], entry["bus_id"], entry["code"], entry["rank"]) == (1, "0000:0f:00", 79, 1)
    assert events[0]["action"] == "exclude"


def test_degrading_card_requests_a_checkpoint_once_the_rate_is_reached(tmp_path: Path) -> None:
    mon, events, _ = _monitor(tmp_path, device=0, rank=0)
    for _ in range(3):
        mon.handle(_sight(92, 0))
    assert [e["action"] for e in events] == ["alert", "alert", "checkpoint"]
    assert mon.checkpoint_due() is True  # no process group: this rank alone decides
    assert mon.checkpoint_due() is False  # one request, one checkpoint


def test_a_line_written_to_the_followed_file_is_acted_on_within_50ms(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.touch()
    mon, events, _ = _monitor(tmp_path, device=0, rank=0, sources=[FileSource(log)])
    mon.start()
    try:
        time.sleep(0.05)
        t0 = time.monotonic()
        with open(log, "a") as fh:
            fh.write(format_xid_line(92, bus_id_for(0)) + "\n")
        while not events and time.monotonic() - t0 < 5:
            time.sleep(0.001)
        elapsed = time.monotonic() - t0
    finally:
        mon.stop()
    assert events and events[0]["action"] == "alert"
    assert elapsed < 0.5  # generous for a loaded 2-core box; the benchmark measures the real figure


def test_device_follows_cuda_visible_devices() -> None:
    assert my_device(1, {"CUDA_VISIBLE_DEVICES": "0,2,3"}) == 2
    assert my_device(1, {}) == 1
    assert my_device(0, {"CUDA_VISIBLE_DEVICES": "GPU-1234"}) == 0  # UUIDs: fall back to the slot


def test_start_monitor_writes_protocol_health_events(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "kern.log"
    log.touch()
    monkeypatch.setenv("CHAOS_EVENTS_DIR", str(tmp_path / "events"))
    monkeypatch.setattr("chaos.sdk._writer", None)
    mon = start_monitor([f"file:{log}"], rank=0, local_rank=0)
    try:
        time.sleep(0.05)
        with open(log, "a") as fh:
            fh.write(format_xid_line(63, bus_id_for(0)) + "\n")
        deadline = time.monotonic() + 5
        while not list((tmp_path / "events").glob("*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        mon.stop()
    [path] = list((tmp_path / "events").glob("*.jsonl"))
    rec = json.loads(path.read_text().splitlines()[0])
    assert (rec["ev"], rec["source"], rec["code"], rec["device"], rec["action"]) == ("health", "file", 63, 0, "alert")


def test_an_unavailable_source_is_skipped_but_none_at_all_is_an_error(tmp_path: Path) -> None:
    from chaos.health.sources import SourceUnavailable

    log = tmp_path / "kern.log"
    log.touch()
    mon = start_monitor([f"nvml:{tmp_path / 'no-state.json'}", f"file:{log}"], rank=0, local_rank=0)
    mon.stop()
    assert [s.name for s in mon.sources] == ["file"] and "no-state.json" in mon.errors[0]
    with pytest.raises(SourceUnavailable, match="no health source"):
        start_monitor([f"nvml:{tmp_path / 'no-state.json'}"], rank=0, local_rank=0)
