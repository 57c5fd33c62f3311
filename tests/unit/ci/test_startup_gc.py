"""ci/bench/startup_gc.py: the first step is read from the ranks' event files, the spread is median (min-max)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("startup_gc", ROOT / "ci" / "bench" / "startup_gc.py")
startup_gc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(startup_gc)


def test_the_first_step_of_any_rank_is_the_earliest_step_record(tmp_path: Path) -> None:
    (tmp_path / "rank0.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"ev": "start", "t": 10.0}, {"ev": "step", "t": 12.5, "step": 1}, {"ev": "step", "t": 13.0, "step": 2})))
    (tmp_path / "rank1.jsonl").write_text(json.dumps({"ev": "step", "t": 12.25, "step": 1}) + "\n{torn line")
    assert startup_gc.first_step_t(tmp_path) == 12.25


def test_no_step_is_none_not_zero(tmp_path: Path) -> None:
    (tmp_path / "rank0.jsonl").write_text(json.dumps({"ev": "start", "t": 10.0}))
    assert startup_gc.first_step_t(tmp_path) is None
    assert startup_gc.first_step_t(tmp_path / "missing") is None


def test_spread_is_the_median_and_the_range() -> None:
    assert startup_gc.spread([3.0, 1.0, 2.0]) == "2.00 (1.00-3.00)"
