"""Reading the event protocol: malformed workload lines are named and left out, never read with defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.events import History, record_problem
from chaos.outcome import exit_code_for, judge_protocol

BASE = {"t": 1.0, "mono": 1.0, "pid": 1, "host": "h", "rank": 0, "world_size": 2, "attempt": "0.0"}


@pytest.mark.parametrize("record, problem", [
    ({"ev": "step", "step": "3", "epoch": 0}, "step event: 'step' must be int, got '3'"),
    ({"ev": "step", "epoch": 0}, "step event: 'step' must be int, missing"),
    ({"ev": "step", "step": True, "epoch": 0}, "'step' must be int"),
    ({"ev": "step", "step": 3, "epoch": 0, "samples": [1, "2"]}, "'samples' must be a list of dataset indices"),
    ({"ev": "ckpt_commit", "step": 10}, "ckpt_commit event: 'path' must be str, missing"),
    ({"ev": "final", "step": 5, "attempt": 0}, "final event: 'attempt' must be str, got 0"),
    ({"ev": "start", "rank": None}, "start event: 'rank' must be int, got None"),
])
def test_protocol_breaks_are_named(record: dict, problem: str) -> None:
    assert problem in (record_problem({**BASE, **record}) or "")


@pytest.mark.parametrize("record", [
    {"ev": "step", "step": 3, "epoch": 0, "samples": [1, 2], "loss": 0.5},
    {"ev": "step", "step": 3, "epoch": 0},  # no samples: exactly_once says so itself
    {"ev": "ckpt_load", "step": 0, "path": None},
    {"ev": "final", "step": 5, "digest": None},  # no digest: the golden checks say so themselves
    {"ev": "health", "code": 79},
])
def test_well_formed_records_pass(record: dict) -> None:
    assert record_problem({**BASE, **record}) is None


def test_a_run_with_malformed_lines_is_inconclusive(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    good = {**BASE, "ev": "step", "step": 1, "epoch": 0, "samples": [0, 1]}
    bad = {**BASE, "ev": "step", "step": "2", "epoch": 0}
    (events / "h-1.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n{not json\n")
    (tmp_path / "harness.jsonl").write_text(json.dumps({"ev": "launch", "t": 0.5, "source": "harness"}) + "\n")
    history = History.from_run_dir(tmp_path)
    assert [r["ev"] for r in history.records] == ["launch", "step"]
    assert len(history.malformed) == 2
    assert history.malformed[0].startswith("h-1.jsonl: step event: 'step' must be int, got '2'")
    assert history.malformed[1].startswith("h-1.jsonl: not JSON: {not json")
    result = judge_protocol(history.malformed)
    assert result.verdict == "inconclusive" and "2 event line(s) broke the protocol" in result.reason
    assert exit_code_for([result]) == 1
