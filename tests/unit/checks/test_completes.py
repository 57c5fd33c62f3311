"""completes: exit 0, target step reached, restarts within bound, no timeout; named diagnostics win."""

from __future__ import annotations

from chaos.checks.completes import Completes, CompletesConfig


def run_to(sim, last, restart_at=None):
    from histsim import Cursor

    sim.start("0.0")
    if restart_at:
        sim.train("0.0", 1, restart_at, Cursor(16))
        sim.start("0.1", load=0)
    sim.train("0.1" if restart_at else "0.0", 1, last, Cursor(16))


def judge(outcome, **config):
    return Completes(CompletesConfig(**config)).evaluate(outcome)


def test_passes_when_the_target_step_is_reached(sim, outcome_of):
    run_to(sim, 6)
    result = judge(outcome_of(sim.history(), args={"steps": 6}))
    assert result.verdict == "pass", result.reason
    assert result.figures["restarts"] == 0 and result.figures["max_step"] == 6


def test_exit_zero_short_of_the_target_fails(sim, outcome_of):
    run_to(sim, 4)
    result = judge(outcome_of(sim.history(), args={"steps": 6}))
    assert result.verdict == "fail" and "reached step 4, not 6" in result.reason
    assert judge(outcome_of(sim.history(), args={"steps": 6}), min_step=4).verdict == "pass"


def test_restart_bound(sim, outcome_of):
    run_to(sim, 6, restart_at=3)
    outcome = outcome_of(sim.history(), args={"steps": 6})
    assert judge(outcome, max_restarts=1).verdict == "pass"
    result = judge(outcome, max_restarts=0)
    assert result.verdict == "fail" and "needed 1 restarts" in result.reason


def test_non_zero_exit_quotes_the_last_output_line(sim, outcome_of):
    run_to(sim, 3)
    result = judge(outcome_of(sim.history(), exit_code=1, output_tail="...\nRuntimeError: boom\n"))
    assert result.verdict == "fail"
    assert "exited 1 at step 3" in result.reason and "RuntimeError: boom" in result.reason


def test_timeout_and_diagnostics(sim, outcome_of):
    run_to(sim, 3)
    result = judge(outcome_of(sim.history(), exit_code=None, timed_out=True, args={"steps": 6}))
    assert result.verdict == "fail" and result.reason.startswith("timed out after 60 s at step 3 of 6")
    stuck = "attempt 0.1 spawned, no rank joined the process group within 60 s"
    result = judge(outcome_of(sim.history(), exit_code=None, timed_out=True, diagnostics=[stuck]))
    assert result.reason == stuck


def test_the_final_attempt_must_reach_the_target(sim, outcome_of):
    from histsim import Cursor

    # 0.0 reached step 6; 0.1 resumed from 0 and stopped at 4 with exit 0: the job did not complete.
    sim.start("0.0")
    sim.train("0.0", 1, 6, Cursor(16))
    sim.start("0.1", load=0)
    sim.train("0.1", 1, 4, Cursor(16))
    sim.final("0.1", 4)
    result = judge(outcome_of(sim.history(), args={"steps": 6}))
    assert result.verdict == "fail" and "reached step 4, not 6" in result.reason


def test_an_unknown_target_step_is_inconclusive(sim, outcome_of):
    run_to(sim, 6)
    result = judge(outcome_of(sim.history()))
    assert result.verdict == "inconclusive" and "min_step" in result.reason


def test_the_failure_line_is_the_workers_exception_not_torchruns_banner() -> None:
    from chaos.checks.completes import telling_line

    out = ("[rank0]: Traceback (most recent call last):\n"
           "[rank0]: FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/checkpoint-10/trainer_state.json'\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
           "============================================================\n")
    assert telling_line(out) == ("last error: FileNotFoundError: [Errno 2] No such file or directory: "
                                 "'ckpt/checkpoint-10/trainer_state.json'")
    assert telling_line("ValueError: bad\n=====\n") == "last error: ValueError: bad"
    assert telling_line("step 3\nloss nan\n------\n") == "last output: loss nan"
    assert telling_line("") == "last output: "
