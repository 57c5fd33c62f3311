"""straggler_named: only a health event naming the rank that was really slowed, in time, is a pass."""

from __future__ import annotations

import json
from pathlib import Path

from histsim import make_outcome

from chaos.checks.straggler_named import StragglerNamed, StragglerNamedConfig
from chaos.evidence.events import History
from chaos.evidence.outcome import FaultRecord


def slowed(rank: int = 1) -> FaultRecord:
    return FaultRecord(index=0, kind="straggler", label="straggler#0", t_inject=100.0, t_release=108.0,
                       details={"ranks": [rank], "pids": [11]})


def named(t: float, rank: int, device: int | None = None) -> dict:
    return {"ev": "health", "t": t, "attempt": "0.0", "rank": rank, "source": "straggler", "code": "slow_rank",
            "device": rank if device is None else device, "action": "alert", "slow_rank": rank, "ratio": 2.1}


def judge(records: list[dict], fault: FaultRecord | None = None, run_dir: Path | None = None, **cfg):
    o = make_outcome(History(records), faults=[fault or slowed()])
    if run_dir is not None:
        o.run_dir = run_dir
    return StragglerNamed(StragglerNamedConfig(**cfg)).evaluate(o)


def test_the_slowed_rank_named_in_time_passes() -> None:
    r = judge([named(103.2, 1)])
    assert r.verdict == "pass" and "rank 1 named in 3.2 s" in r.reason


def test_silence_the_wrong_rank_or_too_late_fails() -> None:
    assert "no straggler health event" in judge([]).reason
    assert "rank 0 was named, but rank 1" in judge([named(103.0, 0)]).reason
    late = judge([named(112.0, 1)], within_s=5)
    assert late.verdict == "fail" and "bound 5" in late.reason


def test_a_name_from_before_the_slowdown_is_a_false_alarm() -> None:
    r = judge([named(90.0, 1)])
    assert r.verdict == "fail" and "false alarm" in r.reason


def test_a_detector_that_names_a_rank_all_the_time_fails_even_when_it_is_right() -> None:
    # The lying history: rank 1 named every second, before, during and long after the slowdown.
    r = judge([named(float(t), 1) for t in range(95, 140)], within_s=5)
    assert r.verdict == "fail" and "false alarm" in r.reason


def degraded(node: str = "node1") -> FaultRecord:
    return FaultRecord(index=0, kind="network-degrade", label="network-degrade#0", t_inject=100.0, t_revert=112.0,
                       details={"nodes": [node], "rate_mbit": 20.0})


def link_named(t: float, rank: int, host: str) -> dict:
    return {"ev": "health", "t": t, "attempt": "0.0", "rank": rank, "host": host, "source": "link",
            "code": "slow_link", "device": 0, "action": "alert", "slow_rank": rank, "to_rank": 0, "ratio": 21.8}


def test_a_degraded_link_is_named_by_a_rank_on_its_node() -> None:
    r = judge([link_named(102.3, 1, "node1")], fault=degraded())
    assert r.verdict == "pass" and "node1's link named (rank 1) in 2.3 s" in r.reason


def test_a_degraded_link_unnamed_misnamed_or_named_late_fails() -> None:
    assert "no link health event" in judge([], fault=degraded()).reason
    wrong = judge([link_named(102.0, 0, "node0")], fault=degraded())
    assert wrong.verdict == "fail" and "node1's was the one degraded" in wrong.reason
    late = judge([link_named(110.0, 1, "node1")], fault=degraded(), within_s=5)
    assert late.verdict == "fail" and "bound 5" in late.reason
    # A compute straggler's name is not a link's: it does not answer a network-degrade fault.
    assert judge([named(102.0, 1)], fault=degraded()).verdict == "fail"


def test_nothing_slowed_is_inconclusive() -> None:
    fault = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=100.0)
    assert judge([named(103.0, 1)], fault=fault).verdict == "inconclusive"


def test_eject_needs_the_exclusion_and_the_relaunch(tmp_path: Path) -> None:
    records = [named(103.0, 1)]
    assert "never recorded as excluded" in judge(records, run_dir=tmp_path, eject=True).reason
    (tmp_path / "excluded_devices.json").write_text(json.dumps({"devices": [{"device": 1, "code": "straggler"}]}))
    assert "never relaunched" in judge(records, run_dir=tmp_path, eject=True).reason
    records.append({"ev": "launch", "t": 105.0, "excluded": [1], "nproc_per_node": 1, "source": "harness"})
    r = judge(records, run_dir=tmp_path, eject=True)
    assert r.verdict == "pass" and "ejected" in r.reason and r.figures["straggler#0"]["relaunch_s"] == 2.0


def test_two_overlapping_stragglers_each_named_pass_and_a_third_rank_named_fails() -> None:
    """Issue 32 (false FAIL): the correct naming of the second straggler was called wrong for the first."""
    first = slowed(1)
    second = FaultRecord(index=1, kind="straggler", label="straggler#1", t_inject=104.0, t_release=112.0,
                         details={"ranks": [2], "pids": [12]})
    o = make_outcome(History([named(103.0, 1), named(105.0, 2)]), faults=[first, second])
    r = StragglerNamed(StragglerNamedConfig()).evaluate(o)
    assert r.verdict == "pass", r.reason
    # A rank no fault slowed is still a wrong name.
    o = make_outcome(History([named(103.0, 1), named(105.0, 2), named(106.0, 0)]), faults=[first, second])
    r = StragglerNamed(StragglerNamedConfig()).evaluate(o)
    assert r.verdict == "fail" and "rank 0 was named" in r.reason
    # Only the other fault's rank named while the first was slowed: the first was never noticed.
    o = make_outcome(History([named(105.0, 2)]), faults=[first, second])
    r = StragglerNamed(StragglerNamedConfig()).evaluate(o)
    assert r.verdict == "fail" and "no straggler health event named rank 1" in r.reason
