"""The golden (fault-free) run is a reference only when it was one clean attempt."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.run import golden, runner
from chaos.errors import HarnessError
from chaos.evidence.events import History
from chaos.spec.load import load_experiment

EXPERIMENT = """
name: g
workload: {script: workloads/ddp.py, nproc_per_node: 2, args: {steps: 4}}
target: local
checks: [{completes: {}}]
"""


def _fake_runner(records: list[dict], exit_code: int = 0):
    class FakeRunner:
        def __init__(self, exp, runs_root, **options):  # the options a Runner takes (probe_host, stop_rule)
            self.exp = exp

        def run(self):
            outcome = SimpleNamespace(exit_code=exit_code, timed_out=False, history=History(records))
            return SimpleNamespace(outcome=outcome, run_dir=Path("/runs/g-golden"))

    return FakeRunner


def _records(attempts: list[str]) -> list[dict]:
    out = []
    for a in attempts:
        for rank in (0, 1):
            out += [{"ev": "start", "t": 1.0, "rank": rank, "attempt": a, "dataset_size": 8},
                    {"ev": "step", "t": 2.0, "rank": rank, "attempt": a, "step": 4, "epoch": 0, "samples": [rank]},
                    {"ev": "final", "t": 3.0, "rank": rank, "attempt": a, "step": 4, "digest": "d" + a}]
    return out


@pytest.fixture
def exp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    return load_experiment(tmp_path / "g.yaml", EXPERIMENT)


def test_a_clean_golden_run_is_summarised(exp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "Runner", _fake_runner(_records(["0.0"])))
    summary = golden.Golden(exp, tmp_path / "runs")()
    assert summary["final_step"] == 4 and summary["ranks"]["0"]["digest"] == "d0.0"


def test_a_golden_run_that_restarted_is_no_reference(exp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen for real: a worker aborted at exit after its final event, torchrun restarted the finished job, and
    the Trainer's resume trained a step more; that run's end state must not become the reference."""
    monkeypatch.setattr(runner, "Runner", _fake_runner(_records(["0.0", "0.1"])))
    with pytest.raises(HarnessError, match=r"golden run restarted \(2 attempts, exit 0\)"):
        golden.Golden(exp, tmp_path / "runs")()
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing cached for the next run to trust


def test_a_cached_golden_filed_under_another_key_is_run_again(exp, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from chaos.sdk import DIGEST_VERSION

    runs = []
    fake = _fake_runner(_records(["0.0"]))

    class Counting(fake):  # type: ignore[misc, valid-type]
        def run(self):
            runs.append(1)
            return super().run()

    monkeypatch.setattr(runner, "Runner", Counting)
    golden.Golden(exp, tmp_path / "runs")()
    [cached] = (tmp_path / "cache" / "golden").glob("*.json")
    assert json.loads(cached.read_text())["config_hash"] == exp.workload_hash()
    golden.Golden(exp, tmp_path / "runs")()
    assert len(runs) == 1  # read back
    stale = {**json.loads(cached.read_text()), "config_hash": "0" * 16, "ranks": {"0": {"digest": "stale"}}}
    cached.write_text(json.dumps(stale))
    assert golden.Golden(exp, tmp_path / "runs")()["ranks"]["0"]["digest"] == "d0.0" and len(runs) == 2
    cached.write_text(json.dumps({**stale, "config_hash": exp.workload_hash(), "digest_version": DIGEST_VERSION - 1}))
    golden.Golden(exp, tmp_path / "runs")()
    assert len(runs) == 3  # digests of another scheme are not compared either
