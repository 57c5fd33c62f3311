"""Proof that the verdicts mean something: deliberately broken workloads FAIL for the right reason under
the SIGKILL the reference workload survives (the reference under that kill, passing every check, is
experiments/rank-kill-ddp.yaml, an item of `pytest experiments/`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from chaos.spec.load import load_experiment
from chaos.run.golden import Golden
from chaos.evidence.outcome import RunReport
from chaos.run.runner import Runner
from chaos.runtime.safety import find_leftovers

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "workloads"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform != "linux", reason="torchrun + gloo runs are exercised on Linux"),
]

# Short runs: 8 samples per step over 250 samples, so the kill at step 25 lands in epoch 0 after the
# step-20 checkpoint, and epoch 0 completes (step 32) before the run ends at step 40.
KILL_RANK_1_AT_STEP_25 = """
  - kind: kill-rank
    rank: 1
    signal: SIGKILL
    trigger: {at_step: 25}
"""


def experiment_yaml(name: str, script: Path, checks: list[str], faults: str = KILL_RANK_1_AT_STEP_25,
                    args: str = "{steps: 40, ckpt_every: 10, seed: 0}", max_restarts: int = 3) -> str:
    check_lines = "".join(f"  - {c}\n" for c in checks)
    return (f"name: {name}\n"
            f"workload:\n  script: {script}\n  nproc_per_node: 2\n  max_restarts: {max_restarts}\n  args: {args}\n"
            f"target: local\nfaults:{faults}checks:\n{check_lines}timeout_s: 240\nseed: 0\n")


def run_experiment(tmp_path: Path, text: str, *, golden: bool = True) -> RunReport:
    """Run it; ``golden=False`` where the lie must be caught from the run's own lineage alone (no
    fault-free run to compare with), which also spares a second torchrun run."""
    path = tmp_path / "experiment.yaml"
    path.write_text(text)
    exp = load_experiment(path)
    runs = tmp_path / "runs"
    return Runner(exp, runs_root=runs, golden=Golden(exp, runs) if golden else None).run()


def verdicts(report: RunReport) -> dict[str, object]:
    return {r.kind: r for r in report.checks}


def describe(report: RunReport) -> str:
    lines = [f"run dir {report.run_dir}"]
    lines += [f"{r.kind}: {r.verdict.upper()} {r.reason}" for r in report.checks]
    return "\n".join(lines)


def fixture_script(name: str) -> Path:
    script = FIXTURES / name
    if not script.exists():
        pytest.fail(f"the broken workload {script.relative_to(REPO)} is missing: the proof needs it")
    return script


@pytest.fixture(autouse=True)
def private_golden_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs its own golden run: a cached one from another test must not decide its verdict."""
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))


def test_sampler_restarting_the_epoch_on_resume_fails_exactly_once_with_duplicates(tmp_path: Path) -> None:
    script = fixture_script("ddp_restart_epoch.py")
    report = run_experiment(tmp_path, experiment_yaml("restart-epoch", script, ["completes: {}", "exactly_once: {}"]),
                            golden=False)
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    assert v["exactly_once"].verdict == "fail", describe(report)
    assert v["exactly_once"].figures["duplicated"]["count"] > 0, describe(report)
    assert " duplicated (e.g. index " in v["exactly_once"].reason
    assert report.exit_code == 1


def test_sampler_skipping_a_batch_on_resume_fails_exactly_once_with_gaps(tmp_path: Path) -> None:
    script = fixture_script("ddp_skip_batch.py")
    report = run_experiment(tmp_path, experiment_yaml("skip-batch", script, ["completes: {}", "exactly_once: {}"]),
                            golden=False)
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    assert v["exactly_once"].verdict == "fail", describe(report)
    assert v["exactly_once"].figures["missing"]["count"] > 0, describe(report)
    assert " missing (e.g. index " in v["exactly_once"].reason
    assert report.exit_code == 1


def test_not_restoring_the_optimizer_fails_matches_golden(tmp_path: Path) -> None:
    script = fixture_script("ddp_no_optim_restore.py")
    checks = ["completes: {}", "exactly_once: {}", "matches_golden: {}"]
    report = run_experiment(tmp_path, experiment_yaml("no-optim-restore", script, checks))
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    # The data was consumed correctly; only the resumed state is wrong.
    assert v["exactly_once"].verdict == "pass", describe(report)
    assert v["matches_golden"].verdict == "fail", describe(report)
    assert v["matches_golden"].figures["comparison"] == "digest"
    assert "final digests differ from the fault-free run" in v["matches_golden"].reason
    assert report.exit_code == 1


def test_in_place_checkpoint_killed_mid_write_fails_checkpoint_integrity(tmp_path: Path) -> None:
    script = fixture_script("ddp_inplace_ckpt.py")
    # Kill while the step-20 checkpoint is being written over the step-10 one.
    kill_mid_write = """
  - kind: kill-rank
    rank: 0
    signal: SIGKILL
    trigger: {on_event: {on_event: ckpt_begin, step: 20}, delay_s: 0.3}
"""
    # One restart: each one meets the same torn file, and the verdict is about the file.
    report = run_experiment(tmp_path, experiment_yaml("inplace-ckpt", script, ["checkpoint_integrity: {}"],
                                                      faults=kill_mid_write, max_restarts=1))
    v = verdicts(report)
    assert v["checkpoint_integrity"].verdict == "fail", describe(report)
    assert report.exit_code == 1


# ---- no PASS without proof (issue 9): each lie below once passed; now each exits 1 naming the check.

CORRUPT_THEN_KILL = """
  - kind: corrupt-checkpoint
    mode: bitflip
    target: latest
    trigger: {on_event: {on_event: ckpt_commit, nth: 2}}
  - kind: kill-rank
    rank: 1
    trigger: {on_event: {on_event: ckpt_commit, nth: 2}, delay_s: 0.3}
"""


def test_silently_loading_a_corrupted_checkpoint_is_not_a_pass(tmp_path: Path) -> None:
    script = fixture_script("ddp_silent_load.py")
    report = run_experiment(tmp_path, experiment_yaml("silent-load", script, [
        "completes: {}", "checkpoint_integrity: {}", "exactly_once: {}", "matches_golden: {}"],
        faults=CORRUPT_THEN_KILL))
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    # The independent signal: the flipped weights changed where training ended.
    assert v["matches_golden"].verdict == "fail", describe(report)
    # Nothing reported which checkpoint the restart loaded: "never loaded" would be a lie.
    assert v["checkpoint_integrity"].verdict in ("inconclusive", "fail"), describe(report)
    # No ckpt_load either: the samples may be judged only if the fault-free run's order confirms them
    # (the bit flip hit the weights, not the sampler state).
    eo = v["exactly_once"]
    assert eo.verdict in ("inconclusive", "fail") or "fault-free run's order" in eo.reason, describe(report)
    assert report.exit_code == 1


def test_a_batch_skipped_on_resume_in_the_last_partial_epoch_fails_exactly_once(tmp_path: Path) -> None:
    script = fixture_script("ddp_skip_batch.py")
    # Epoch 0 ends at step 32 (250 samples, 8 a step): the resume from step 35 is inside the last,
    # partial epoch, and the kill lands right after that commit, so few or no steps are rolled back.
    kill_after_commit = """
  - kind: kill-rank
    rank: 1
    trigger: {on_event: {on_event: ckpt_commit, step: 35}}
"""
    report = run_experiment(tmp_path, experiment_yaml(
        "skip-partial", script, ["completes: {}", "exactly_once: {}"], faults=kill_after_commit,
        args="{steps: 44, ckpt_every: 5, seed: 0}"))
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    assert v["exactly_once"].verdict == "fail", describe(report)
    assert report.exit_code == 1


def test_steps_that_report_no_samples_leave_exactly_once_inconclusive(tmp_path: Path) -> None:
    script = fixture_script("ddp_empty_samples.py")
    # No fault needed: without samples nothing can be traced, restart or not.
    report = run_experiment(tmp_path, experiment_yaml("empty-samples", script, ["completes: {}", "exactly_once: {}"],
                                                      faults=" []\n", args="{steps: 20, ckpt_every: 10, seed: 0}"),
                            golden=False)
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    assert v["exactly_once"].verdict == "inconclusive", describe(report)
    assert report.exit_code == 1


def test_a_hang_under_the_default_collective_timeout_fails_detection(tmp_path: Path) -> None:
    # gloo's default timeout (30 minutes): the hang is released after 8 s and the job simply carries
    # on. Its normal end is not a reaction to the hang.
    hang = """
  - kind: hang-rank
    rank: 1
    duration_s: 8
    trigger: {at_step: 10}
"""
    report = run_experiment(tmp_path, experiment_yaml(
        "hang-default-timeout", REPO / "workloads" / "ddp.py", ["completes: {max_restarts: 0}",
                                                                 "detection: {max_s: 25}"],
        faults=hang, args="{steps: 30, ckpt_every: 10, seed: 0, pg_timeout_s: 1800}"))
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    assert v["detection"].verdict == "fail", describe(report)
    assert "never acted on" in v["detection"].reason and "before it was released" in v["detection"].reason
    assert report.outcome.faults[0].recovery["detect_s"] is None
    assert report.exit_code == 1


def test_a_fault_that_never_fires_fails_the_run(tmp_path: Path) -> None:
    never = """
  - kind: kill-rank
    rank: 1
    trigger: {at_step: 500}
"""
    report = run_experiment(tmp_path, experiment_yaml(
        "never-fires", REPO / "workloads" / "ddp.py", ["completes: {}"], faults=never,
        args="{steps: 20, ckpt_every: 10, seed: 0}"))
    v = verdicts(report)
    assert v["completes"].verdict == "pass", describe(report)
    assert v["fault_injected"].verdict == "fail", describe(report)
    assert v["fault_injected"].reason.startswith("kill-rank#0 never injected: trigger at_step 500, run ended at step 20")
    assert report.exit_code == 1


def test_a_first_attempt_hung_before_its_process_group_is_named_at_the_join_timeout(tmp_path: Path) -> None:
    # Real torchrun and gloo: rank 0 waits in init_process_group for a rank 1 that never comes. The
    # SDK's hello at import tells this apart from a script without the protocol, so the run ends at
    # join_timeout_s (10 s) with the attempt named, not at timeout_s (240 s) as a bare timeout.
    path = tmp_path / "hang.yaml"
    path.write_text(experiment_yaml("hang-init", FIXTURES / "ddp_hang_init.py", ["completes: {}"], faults=" []\n",
                                    max_restarts=0).replace("  args:", "  join_timeout_s: 10\n  args:"))
    report = Runner(load_experiment(path), runs_root=tmp_path / "runs", golden=None).run()
    assert report.exit_code == 1 and not report.outcome.timed_out
    [said] = report.outcome.diagnostics
    assert said.startswith("attempt 0.0 spawned, no rank joined the process group within 10 s"), said
    assert report.outcome.wall_s < 90, report.outcome.wall_s
    assert find_leftovers(report.run_dir) == []  # the hung ranks were stopped with the run
