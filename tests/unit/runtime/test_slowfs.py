"""The slow filesystem's pacing, on a fake clock: one bandwidth budget for all writers, latency, stalls, the control
file re-read the moment it is replaced, and what it counts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chaos.runtime.slowfs import Control, Pacer


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def time(self) -> float:
        return self.t


def pacer(tmp_path: Path, **state) -> tuple[Pacer, Clock, Path]:
    control = tmp_path / "control.json"
    control.write_text(json.dumps(state))
    clock = Clock()
    return Pacer(Control(str(control)), str(tmp_path / "stats.json"), clock=clock), clock, control


def set_control(path: Path, **state) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def test_pass_through_when_told_nothing(tmp_path: Path):
    p, _, _ = pacer(tmp_path)
    assert [p.delay("write", 1 << 20), p.delay("read"), p.delay("meta"), p.delay("sync")] == [0, 0, 0, 0]
    assert p.stats["ops_delayed"] == 0 and p.stats["bytes_written"] == 1 << 20


def test_one_bandwidth_budget_is_shared_by_every_writer(tmp_path: Path):
    p, clock, _ = pacer(tmp_path, write_mbps=1.0)
    # Two writers at once, 1 MB each at 1 MB/s: the second waits for the first (2 s), as on one disk.
    assert p.delay("write", 1_000_000) == pytest.approx(1.0)
    assert p.delay("write", 1_000_000) == pytest.approx(2.0)
    clock.t += 5.0  # idle: the budget does not bank time
    assert p.delay("write", 500_000) == pytest.approx(0.5)
    assert p.delay("read") == 0
    assert p.stats["delay_s"] == pytest.approx(3.5) and p.stats["ops_delayed"] == 3


def test_latency_on_everything_but_reads(tmp_path: Path):
    p, _, _ = pacer(tmp_path, latency_ms=20)
    assert [p.delay(op) for op in ("write", "sync", "meta", "read")] == [pytest.approx(0.02)] * 3 + [0]


def test_a_stall_holds_every_operation_until_it_ends(tmp_path: Path):
    p, clock, _ = pacer(tmp_path, stall_until=1003.0)
    assert p.delay("read") == pytest.approx(3.0)
    clock.t = 1002.5
    assert p.delay("meta") == pytest.approx(0.5)
    clock.t = 1003.5
    assert p.delay("read") == 0
    assert p.stats["stalled_ops"] == 2 and p.stats["stall_s"] == pytest.approx(3.5)


def test_a_write_during_a_stall_starts_its_share_after_it(tmp_path: Path):
    p, _, _ = pacer(tmp_path, write_mbps=1.0, stall_until=1002.0)
    assert p.delay("write", 1_000_000) == pytest.approx(3.0)


def test_the_control_applies_from_the_next_operation(tmp_path: Path):
    p, _, control = pacer(tmp_path)
    assert p.delay("write", 1_000_000) == 0
    set_control(control, write_mbps=2.0)       # replaced within the same clock tick: still seen
    assert p.delay("write", 1_000_000) == pytest.approx(0.5)
    set_control(control)
    assert p.delay("write", 1_000_000) == 0
    control.write_text("{not json")            # half written: the last good state stands
    assert p.control.now() == {}


def test_stats_are_written_whole(tmp_path: Path):
    p, _, _ = pacer(tmp_path, latency_ms=10)
    p.delay("meta")
    p.write_stats()
    assert json.loads((tmp_path / "stats.json").read_text())["ops_delayed"] == 1


def test_a_fail_rule_fails_only_the_matching_files_writes_and_says_which(tmp_path: Path):
    p, clock, control = pacer(tmp_path, fail={"paths": ["*rng_rank1.pt"], "errno": "EIO"})
    import errno

    assert p.failure("create", "/.tmp-step_000020-ab/rng_rank1.pt") == errno.EIO
    assert p.failure("write", "/.tmp-step_000020-ab/rng_rank1.pt") == errno.EIO
    assert p.failure("create", "/.tmp-step_000020-ab/rng_rank0.pt") is None  # the other rank's file succeeds
    assert p.failure("read", "/step_000010/rng_rank1.pt") is None  # reads are never failed
    assert p.stats["failed_ops"] == 2
    assert p.stats["failures"][0] == {"t": 1000.0, "op": "create", "path": ".tmp-step_000020-ab/rng_rank1.pt",
                                      "errno": "EIO"}
    set_control(control, fail={"paths": ["*.distcp"], "errno": "ENOSPC", "ops": ["fsync"]})
    assert p.failure("write", "/s/__1_0.distcp") is None and p.failure("fsync", "/s/__1_0.distcp") == errno.ENOSPC
    set_control(control)  # reverted: pass-through
    assert p.failure("create", "/.tmp-step_000030-cd/rng_rank1.pt") is None
    p.write_stats()
    assert json.loads((tmp_path / "stats.json").read_text())["failed_ops"] == 3
