"""The run loop against a torch-free fake torchrun: triggers, kill-rank, recovery figures, reverts, named hangs."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

from chaos.runtime.clock import ScaledClock
from chaos.evidence.events import History
from chaos.spec.load import load_experiment
from chaos.run.runner import Runner
from chaos.runtime.safety import run_processes

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_torchrun.py"


def experiment(tmp_path: Path, body: str, extra_args: str = ""):
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: fake
        workload:
          command: [{sys.executable}, {FAKE}, --steps, "40", --step-sleep, "0.03" {extra_args}]
          join_timeout_s: 3
        timeout_s: 60
        """) + textwrap.dedent(body))
    return load_experiment(path)


def test_kill_rank_is_injected_at_the_step_and_recovery_is_timed(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 1
            trigger: {at_step: 12}
        checks:
          - completes: {max_restarts: 1, min_step: 40}
          - recovery_time: {metric: resume_s, max_s: 20}
        """)
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.exit_code == 0, [(c.kind, c.reason) for c in report.checks]
    [fault] = report.outcome.faults
    assert fault.details["ranks"] == [1] and fault.details["signal"] == "SIGKILL"
    rec = fault.recovery
    assert rec["attempt_before"] == "0.0" and rec["attempt_after"] == "0.1"
    assert rec["pre_fault_max_step"] >= 12
    # The fake's ranks do not step in lock-step: under load rank 1 can reach step 12 before rank 0 has
    # committed step 10, and rank 0 may commit once more before the agent stops it. The resume must
    # be from the newest commit the killed attempt made, whichever that was.
    commits = [r["step"] for r in report.outcome.history.of("ckpt_commit", attempt="0.0")]
    assert commits and rec["resumed_from_step"] == max(commits) and rec["resumed_from_step"] % 5 == 0
    # Resumed from the newest durable checkpoint: nothing lost, wherever the kill landed (issue 39).
    # The ranks waited at step 12 until the kill had acted (chaos.sdk.step's hold): it landed exactly there.
    assert rec["lost_steps"] == 0 and rec["trigger_step"] == 12 and rec["landed_step"] == 12
    assert not (report.run_dir / "holds").exists()
    assert rec["steps_since_ckpt"] == rec["landed_step"] - rec["durable_step"] >= 0
    assert 0 <= rec["detect_s"] <= rec["restart_s"] <= rec["resume_s"] <= rec["regain_s"]
    journal = json.loads((report.run_dir / "journal.json").read_text())
    assert journal["faults"][0]["recovery"]["resume_s"] == rec["resume_s"]
    assert journal["faults"][0]["recovery"]["landed_step"] == rec["landed_step"]
    assert journal["attempts"] == ["0.0", "0.1"]
    assert fault.details["trigger_step"] == 12  # recorded by the runner, not read back from "at_step 12"
    # The host's speed around the run, which the baseline gate compares timing figures at (issue 39).
    speed = journal["host_speed"]
    assert speed["before"] > 0 and speed["after"] > 0 and speed["probe_s"] > 0
    junit = (report.run_dir / "junit.xml").read_text()
    assert 'tests="2"' in junit and 'failures="0"' in junit
    assert_one_history(report)


def assert_one_history(report) -> None:
    """The history the loop kept, which the checks judged, is what the run's files say: nothing the
    ranks or the harness wrote was missed, nothing is there twice."""
    def canon(history: History) -> list[str]:
        return sorted(json.dumps(r.to_dict(), sort_keys=True, default=str) for r in history.records)
    disk = History.from_run_dir(report.run_dir)
    assert canon(report.outcome.history) == canon(disk)
    assert report.outcome.history.malformed == disk.malformed


def test_a_failed_check_gives_exit_1_with_a_reason(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 0
            trigger: {at_step: 12}
        checks:
          - completes: {max_restarts: 0}
        """)
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.exit_code == 1
    assert report.checks[0].verdict == "fail"
    assert "needed 1 restarts, more than the allowed 0" in report.checks[0].reason


def test_timeout_kills_the_tree_and_says_so(tmp_path: Path) -> None:
    exp = experiment(tmp_path, "checks: [completes]\n")
    exp.timeout_s = 0.5
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.outcome.timed_out and report.exit_code == 1
    assert report.checks[0].reason.startswith("timed out after 0.5 s")
    assert report.run_dir.joinpath("ledger.jsonl").read_text().splitlines()[-1].startswith('{"closed"')


def test_the_runs_one_clock_times_its_limits_and_stamps_everything_it_writes(tmp_path: Path) -> None:
    # A clock 20x faster than the host's and 100 days ahead: the 40 s timeout passes in 2 s of real
    # time, and every stamp the run writes (its log, its ledger, the fault's) is on that clock.
    shift = 100 * 86400.0
    clock = ScaledClock(factor=20, shift_s=shift)
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 1
            trigger: {at_step: 3}
        checks: [completes]
        """, extra_args=', --steps, "100000"')
    exp.timeout_s = 40
    # The join timeout is on the same clock: 3 s would be 0.15 s of real time for the restart.
    exp.workload = exp.workload.model_copy(update={"join_timeout_s": 600})
    began = time.monotonic()
    report = Runner(exp, runs_root=tmp_path / "runs", clock=clock).run()
    real_s = time.monotonic() - began
    assert report.outcome.timed_out and report.checks[0].reason.startswith("timed out after 40 s")
    assert real_s < 20 <= report.outcome.wall_s, (real_s, report.outcome.wall_s)
    ahead = clock._wall0 + shift
    [fault] = report.outcome.faults
    assert fault.injected and ahead <= fault.t_inject <= fault.t_revert
    logged = [json.loads(line) for line in (report.run_dir / "harness.jsonl").read_text().splitlines()]
    ledger = [json.loads(line) for line in (report.run_dir / "ledger.jsonl").read_text().splitlines()]
    assert logged and all(r["t"] >= ahead for r in logged)
    assert [r for r in ledger if "t" in r] and all(r["t"] >= ahead for r in ledger if "t" in r)
    assert report.run_dir.name.startswith(f"fake-{datetime.fromtimestamp(ahead):%Y%m%d}")


def test_an_attempt_stuck_before_joining_is_named(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 1
            trigger: {at_step: 5}
        checks: [completes]
        """, extra_args=", --hang-init")
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.exit_code == 1
    assert report.outcome.diagnostics == ["attempt 0.1 spawned, no rank joined the process group within 3 s"]
    assert report.checks[0].reason == report.outcome.diagnostics[0]
    assert report.outcome.wall_s < 30  # named at join_timeout_s, not at timeout_s


def test_a_first_attempt_stuck_before_joining_is_named(tmp_path: Path) -> None:
    # No attempt ever sent start: the SDK's hello at import is what tells a hung init from a script
    # without the protocol, so the run ends at join_timeout_s, not at timeout_s (60 s here).
    exp = experiment(tmp_path, """\
        checks: [completes]
        """, extra_args=", --hang-init-first")
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.exit_code == 1 and not report.outcome.timed_out
    [said] = report.outcome.diagnostics
    assert said.startswith("attempt 0.0 spawned, no rank joined the process group within 3 s (its ranks loaded")
    assert report.outcome.wall_s < 30


def test_a_job_that_goes_silent_is_named_stalled_at_stall_s(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        checks: [completes]
        """, extra_args=", --stall-at, \"10\"")
    exp.workload.stall_s = 2
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.exit_code == 1 and not report.outcome.timed_out
    [said] = report.outcome.diagnostics
    assert said.startswith("no rank reported anything for 2 s (workload.stall_s 2); the last was step 10 of attempt 0.0")
    assert report.outcome.wall_s < 30  # named at stall_s, not at timeout_s (60 s)
    assert not run_processes(report.run_dir), "a stalled run's processes outlived it"


def test_fault_error_is_recorded_not_raised(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 7
            trigger: {at_step: 3}
        checks: [{recovery_time: {max_s: 30}}]
        """)
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    [fault] = report.outcome.faults
    assert "no live worker with rank 7" in fault.error
    # The failed injection fails the run by itself; the check it starves says it has nothing to judge.
    assert report.exit_code == 1
    assert [(c.kind, c.verdict) for c in report.checks] == [("fault_injected", "fail"), ("recovery_time", "inconclusive")]
    assert report.checks[0].reason.startswith("kill-rank#0 failed to inject: no live worker with rank 7")
    assert "no fault was injected" in report.checks[1].reason


@pytest.mark.parametrize("delay", [0.0, 0.4])
def test_delay_s_postpones_injection(tmp_path: Path, delay: float) -> None:
    exp = experiment(tmp_path, f"""\
        faults:
          - kind: kill-rank
            rank: 1
            trigger: {{at_step: 5, delay_s: {delay}}}
        """)
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    [fault] = report.outcome.faults
    steps_at_inject = fault.details["max_step_before"]
    # 0.4 s at 0.03 s per step is over ten more steps.
    assert (steps_at_inject >= 12) == (delay > 0), steps_at_inject


def test_a_script_without_the_protocol_is_followed_through_step_regex(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 1
            trigger: {at_step: 8}
        checks:
          - completes: {max_restarts: 1, min_step: 40}
        """, extra_args=", --no-events")
    exp.workload.step_regex = r"^step (?P<step>\d+)$"
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    # No `start` ever arrives, yet the restarted attempt is not mistaken for one stuck in init.
    assert report.outcome.diagnostics == []
    assert report.exit_code == 0, [(c.kind, c.reason) for c in report.checks]
    [fault] = report.outcome.faults
    assert fault.details["ranks"] == [1] and fault.details["max_step_before"] >= 8
    assert not list((report.run_dir / "events").iterdir())
    # Seen from outside, labelled as such: the regex steps belong to the restarted attempt, and every
    # recovery figure is there (issue 9, group 7: "resume_s never happened", "0 attempt(s)").
    rec = fault.recovery
    assert rec["attempt_before"] == "0.0" and rec["attempt_after"] == "0.1", rec
    assert rec["restart_s"] is not None and rec["resume_s"] is not None and rec["regain_s"] is not None, rec
    assert "seen from outside" in rec["evidence"]["resume_s"] and "step_regex" in rec["evidence"]["resume_s"]
    assert "inferred" in rec["evidence"]["lost_steps"]
    journal = json.loads((report.run_dir / "journal.json").read_text())
    assert journal["attempts"] == ["0.0", "0.1"]
    assert_one_history(report)


def test_regex_workload_recovery_time_passes_with_figures_seen_from_outside(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 1
            trigger: {at_step: 8}
        checks:
          - recovery_time: {metric: resume_s, max_s: 30}
        """, extra_args=", --no-events")
    exp.workload.step_regex = r"^step (?P<step>\d+)$"
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    [check] = report.checks
    assert check.verdict == "pass" and "seen from outside" in check.reason, check


@pytest.mark.parametrize("optional", [False, True])
def test_a_fault_whose_trigger_never_fires_fails_the_run_unless_optional(tmp_path: Path, optional: bool) -> None:
    exp = experiment(tmp_path, f"""\
        faults:
          - kind: kill-rank
            rank: 1
            optional: {str(optional).lower()}
            trigger: {{at_step: 500}}
        checks:
          - completes: {{min_step: 40}}
        """)
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    [fault] = report.outcome.faults
    assert fault.status == "never_fired" and fault.t_inject is None
    verdicts = {c.kind: c for c in report.checks}
    assert verdicts["completes"].verdict == "pass"  # the job itself was fine: the experiment proved nothing
    if optional:
        assert report.exit_code == 0 and "fault_injected" not in verdicts, verdicts
        return
    assert report.exit_code == 1
    assert verdicts["fault_injected"].verdict == "fail"
    assert verdicts["fault_injected"].reason.startswith(
        "kill-rank#0 never injected: trigger at_step 500, run ended at step 40")
    junit = (report.run_dir / "junit.xml").read_text()
    assert 'failures="1"' in junit and "never injected" in junit


def test_a_delayed_injection_still_pending_at_the_end_fails_the_run(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        faults:
          - kind: kill-rank
            rank: 1
            trigger: {at_step: 38, delay_s: 30}
        checks:
          - completes: {min_step: 40}
        """)
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.exit_code == 1
    [fault] = report.outcome.faults
    assert fault.status == "pending"
    assert "delay_s had not run out" in {c.kind: c for c in report.checks}["fault_injected"].reason


def test_zero_restarts_fails_an_experiment_that_needs_one(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        checks:
          - completes: {min_restarts: 1, min_step: 40}
        """)
    report = Runner(exp, runs_root=tmp_path / "runs").run()
    assert report.exit_code == 1
    assert "0 restart(s), fewer than the 1" in report.checks[0].reason


def test_a_repeating_trigger_that_fired_is_not_failed_for_a_draw_still_delayed_at_the_end() -> None:
    from types import SimpleNamespace

    trigger = SimpleNamespace(describe=lambda: "every_n_steps 10")
    fault = SimpleNamespace(index=0, kind="straggler", label="straggler#0",
                            config=SimpleNamespace(optional=False))

    def armed(fires: int, due: list[float]) -> SimpleNamespace:
        return SimpleNamespace(fault=fault, spec=SimpleNamespace(trigger=trigger), fires=fires, due=due)

    assert Runner._unfired([armed(fires=2, due=[99.0])]) == []  # it acted; the last draw is just late
    [pending] = Runner._unfired([armed(fires=0, due=[99.0])])
    assert pending.status == "pending" and not pending.injected
    [never] = Runner._unfired([armed(fires=0, due=[])])
    assert never.status == "never_fired"


def test_a_game_day_stop_rule_ends_the_run_with_its_reason(tmp_path: Path) -> None:
    # One GPU for a day draws no fault; the workload's 3 s steps break no_progress_s: 1.
    exp = experiment(tmp_path, """\
        gameday: {gpus: 1, span_days: 1, window_s: 5, stop: {no_progress_s: 1}}
        checks:
          - completes: {}
        """, extra_args=', --step-sleep, "3"')
    assert exp.schedule == []
    # The game day plugs its stop rules into the runner from outside (chaos.run.session).
    from chaos.run.session import build_runner

    runner = build_runner(exp, tmp_path / "runs", golden=False)
    assert runner.stop_rule is not None and runner.independent_faults
    assert Runner(exp, runs_root=tmp_path / "runs").stop_rule is None
    report = runner.run()
    verdicts = {c.kind: c for c in report.checks}
    assert report.exit_code == 1
    assert verdicts["completes"].verdict == "fail"
    assert verdicts["completes"].reason.startswith("game day stopped: no progress for")
    assert verdicts["fault_mix"].verdict == "inconclusive"  # nothing drawn: nothing tested
    assert any(r.get("ev") == "gameday_stop" for r in report.outcome.history.records)


def test_a_live_view_that_raises_is_dropped_and_the_run_goes_on(tmp_path: Path) -> None:
    exp = experiment(tmp_path, """\
        checks:
          - completes: {min_step: 40}
        """)
    seen = []

    def view(state) -> None:
        seen.append(state.max_step)
        raise RuntimeError("terminal gone")

    report = Runner(exp, runs_root=tmp_path / "runs", on_poll=view).run()
    assert report.exit_code == 0 and len(seen) == 1
    assert any(r.get("ev") == "live_view_error" for r in report.outcome.history.records)


def test_an_interrupt_after_the_reverts_does_not_cut_the_report_short(tmp_path: Path, monkeypatch) -> None:
    # Ctrl-C while journal.json is being written (the reverts are done): the runner's handler still holds,
    # says so and lets the report finish; the caller's own handler is back afterwards, never called.
    import os
    import signal

    import chaos.run.runner as runner_module

    exp = experiment(tmp_path, "checks: [{completes: {min_step: 40}}]\n")
    caller: list[int] = []

    def record(signum, _frame):
        caller.append(signum)

    previous = signal.signal(signal.SIGINT, record)
    write = runner_module.Journal.write

    def interrupted_write(journal, folder):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs at the next bytecode of the main thread, here
        return write(journal, folder)

    monkeypatch.setattr(runner_module.Journal, "write", interrupted_write)
    try:
        report = Runner(exp, runs_root=tmp_path / "runs").run()
        restored = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert caller == [], "the interrupt reached the caller's handler while the report was being written"
    assert report.exit_code == 0, [(c.kind, c.verdict, c.reason) for c in report.checks]
    assert restored is record
    journal = json.loads((report.run_dir / "journal.json").read_text())
    assert journal["exit_code"] == 0
    assert not list(report.run_dir.glob(".journal.json*")), "a temporary journal was left behind"


def test_interrupts_while_finishing_with_nothing_left_to_revert_let_the_report_finish(tmp_path: Path, capsys) -> None:
    # The reverts are done but the run is still closing up (the witness stopping): a second Ctrl-C has
    # nothing to skip, so it must neither list an empty "Left behind:" nor exit without the report.
    from types import SimpleNamespace

    runner = Runner(experiment(tmp_path, "checks: [completes]\n"), runs_root=tmp_path / "runs")
    runner.run_ctx = SimpleNamespace(ledger=SimpleNamespace(pending=lambda: []), run_dir=tmp_path)
    runner._finishing = True
    runner._on_signal(2, None)
    runner._on_signal(2, None)  # returns: os._exit would end the test process here
    err = capsys.readouterr().err
    assert err.count("the faults are reverted; finishing the report") == 2 and "Left behind" not in err


def test_the_golden_run_is_obtained_once_before_judging_and_only_when_a_check_needs_it(tmp_path: Path) -> None:
    """Issue 33: no check starts a nested run. The runner asks each check (Check.needs_golden), obtains
    the golden summary once, then judges; a run whose checks need none never obtains it."""
    calls: list[float] = []

    def golden() -> dict:
        calls.append(time.monotonic())
        return {"ranks": {}, "world_size": 2, "final_step": 40, "final_loss": None, "final_loss_problem": None}

    exp = experiment(tmp_path, """\
        checks:
          - completes: {min_step: 40}
          - matches_golden: {}
        """)
    report = Runner(exp, runs_root=tmp_path / "runs", golden=golden).run()
    assert len(calls) == 1  # once, though matches_golden reads it while judging
    assert {c.kind for c in report.checks} == {"completes", "matches_golden"}

    calls.clear()
    quiet = experiment(tmp_path, """\
        checks:
          - completes: {min_step: 40}
        """)
    Runner(quiet, runs_root=tmp_path / "runs", golden=golden).run()
    assert calls == []


def test_a_check_that_reads_the_golden_without_asking_gets_an_error_not_a_run() -> None:
    from chaos.errors import ChaosError, HarnessError
    from chaos.run.judge import _obtained

    started: list[int] = []
    unasked = _obtained(lambda: started.append(1) or {}, needed=False)
    with pytest.raises(HarnessError, match="needs_golden"):
        unasked()
    assert started == []
    boom = ChaosError("the golden run failed: exit 1")

    def failing() -> dict:
        started.append(1)
        raise boom

    failed = _obtained(failing, needed=True)
    assert started == [1]  # obtained before judging, once
    for _ in range(2):
        with pytest.raises(ChaosError) as info:
            failed()
        assert info.value is boom
    assert started == [1]
