"""A run's figures as Prometheus metrics: every value comes from the journal or the live state, none is made up."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from chaos.errors import UsageError
from chaos.evidence.events import History
from chaos.evidence.fault_record import FaultRecord
from chaos.evidence.outcome import CheckResult
from chaos.report.journal import Journal
from chaos.report.metrics import Outputs, RunMetrics, check_textfile
from chaos.run.progress import LiveState


def samples(metrics: RunMetrics) -> dict[tuple[str, frozenset], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(metrics: RunMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


def journal(tmp_path: Path, *, check_verdict: str = "pass") -> Journal:
    kill = FaultRecord(0, "kill-rank", "kill-rank#0", 100.0, details={"ranks": [1]}, t_revert=100.0,
                       recovery={"detect_s": 0.26, "restart_s": 1.54, "resume_s": 2.44, "regain_s": None,
                                 "lost_steps": 5})
    broken = FaultRecord(1, "partition", "partition#1", None, error="nft refused the rule", status="failed")
    j = Journal(experiment="rank-kill-ddp", run_dir=str(tmp_path / "rank-kill-ddp-20261126-1"), started=90.0,
                wall_s=10.5, exit_code=0 if check_verdict == "pass" else 1,
                verdict="PASS" if check_verdict == "pass" else "FAIL", attempts=["0.0", "0.1"], max_step=60,
                faults=[kill, broken],
                checks=[CheckResult("completes", "pass", "exit 0"), CheckResult("exactly_once", check_verdict, "...")],
                goodput={"goodput": 0.61, "seconds": {"productive": 6.4, "startup": 2.0, "ckpt_save": 0.3,
                                                      "recompute": 0.5, "detection": 0.2, "restart": 1.1}})
    return j


def test_a_finished_run_s_figures_are_its_journal_s(tmp_path: Path) -> None:
    m = RunMetrics()
    m.finished(journal(tmp_path))
    run = {"experiment": "rank-kill-ddp", "run": "rank-kill-ddp-20261126-1"}
    assert value(m, "chaos_run_verdict", **run, verdict="PASS") == 1
    assert value(m, "chaos_run_verdict", **run, verdict="FAIL") == 0
    assert value(m, "chaos_run_duration_seconds", **run) == 10.5
    assert value(m, "chaos_run_restarts", **run) == 1
    assert value(m, "chaos_training_step", **run) == 60
    fault = {**run, "fault": "kill-rank#0", "kind": "kill-rank"}
    assert value(m, "chaos_fault_recovery_seconds", **fault, phase="detect") == 0.26
    assert value(m, "chaos_fault_recovery_seconds", **fault, phase="resume") == 2.44
    assert value(m, "chaos_fault_recovery_seconds", **fault, phase="regain") is None  # not measured: no series
    assert value(m, "chaos_fault_lost_steps", **fault) == 5
    assert value(m, "chaos_faults_injected_total", **run, kind="kill-rank") == 1
    assert value(m, "chaos_faults_injected_total", **run, kind="partition") is None
    assert value(m, "chaos_faults_failed_total", **run, kind="partition") == 1
    assert value(m, "chaos_check_verdict", **run, check="exactly_once", verdict="pass") == 1
    assert value(m, "chaos_goodput_ratio", **run) == 0.61
    assert value(m, "chaos_productive_seconds", **run) == 6.4
    # ml-goodput-measurement's names where they mean the same; the harness's own elsewhere.
    assert value(m, "chaos_badput_seconds", **run, cause="program_startup") == 2.0
    assert value(m, "chaos_badput_seconds", **run, cause="unproductive_checkpoint_save_time") == 0.3
    assert value(m, "chaos_badput_seconds", **run, cause="wasted_progress_from_disruption") == 0.5
    assert value(m, "chaos_badput_seconds", **run, cause="restart") == 1.1


def test_a_failed_check_is_a_fail_and_nothing_else(tmp_path: Path) -> None:
    m = RunMetrics()
    m.finished(journal(tmp_path, check_verdict="fail"))
    run = {"experiment": "rank-kill-ddp", "run": "rank-kill-ddp-20261126-1", "check": "exactly_once"}
    states = {v: value(m, "chaos_check_verdict", **run, verdict=v) for v in ("pass", "fail", "inconclusive")}
    assert states == {"pass": 0, "fail": 1, "inconclusive": 0}


def test_live_polls_count_each_fault_once_and_the_finish_does_not_count_it_again(tmp_path: Path) -> None:
    m = RunMetrics()
    j = journal(tmp_path)
    rec = FaultRecord(0, "kill-rank", "kill-rank#0", 100.0, t_revert=None)
    history = History([{"ev": "start", "t": 1.0, "mono": 1.0, "pid": 7, "host": "h", "rank": 0, "attempt": "0.0"}])
    for now in (1.0, 2.0, 3.0):
        m.live("rank-kill-ddp", "rank-kill-ddp-20261126-1", 90.0,
               LiveState(now, 12, "0.0", history, [rec], [], tmp_path / "rank-kill-ddp-20261126-1"))
    run = {"experiment": "rank-kill-ddp", "run": "rank-kill-ddp-20261126-1"}
    assert value(m, "chaos_run_verdict", **run, verdict="RUNNING") == 1
    assert value(m, "chaos_faults_injected_total", **run, kind="kill-rank") == 1
    assert value(m, "chaos_faults_reverted_total", **run, kind="kill-rank") is None
    m.finished(j)
    assert value(m, "chaos_faults_injected_total", **run, kind="kill-rank") == 1
    assert value(m, "chaos_faults_reverted_total", **run, kind="kill-rank") == 1
    assert value(m, "chaos_run_verdict", **run, verdict="RUNNING") == 0


def test_the_textfile_is_written_whole_where_the_node_exporter_reads(tmp_path: Path) -> None:
    m = RunMetrics()
    m.finished(journal(tmp_path))
    out = m.write_textfile(tmp_path / "chaos.prom")
    assert 'chaos_run_verdict{experiment="rank-kill-ddp",run="rank-kill-ddp-20261126-1",verdict="PASS"} 1.0' in \
        out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["chaos.prom"]  # no temporary file left beside it


@pytest.mark.parametrize("path, says", [("metrics.txt", "ending in .prom"), ("no/such/dir/x.prom", "does not exist")])
def test_a_textfile_the_node_exporter_cannot_read_is_refused_before_any_run(tmp_path: Path, path: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        check_textfile(str(tmp_path / path))


def test_a_port_that_is_not_one_and_a_pushgateway_that_does_not_answer_are_refused() -> None:
    with pytest.raises(UsageError, match="not a TCP port"):
        Outputs(port=70000)
    with pytest.raises(UsageError, match="no Pushgateway answers there"):
        Outputs(pushgateway="http://127.0.0.1:1").start()


def test_a_failed_push_after_a_run_is_said_and_keeps_the_runs_going(tmp_path: Path) -> None:
    j = journal(tmp_path)
    Path(j.run_dir).mkdir()
    j.write(Path(j.run_dir))
    said: list[str] = []
    out = Outputs(pushgateway="http://127.0.0.1:1")  # not started: the push itself fails
    out.after_run(Path(j.run_dir), SimpleNamespace(print=said.append))
    assert len(said) == 1 and "metrics not exported" in said[0] and "journal.json" in said[0]
