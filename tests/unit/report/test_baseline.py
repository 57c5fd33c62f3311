"""Baselines: figures from journals, noise-aware bounds, regressions named by figure, and the CLI around them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.report.baseline import build_baseline, compare, figures_of, load_baseline, markdown_summary
from chaos.cli import main
from chaos.errors import UsageError
from chaos.report.journal import Journal


def journal(resume_s: float = 3.0, save_s: float = 0.04, wall_s: float = 15.0, exit_code: int = 0,
            path: str = "runs/x", name: str = "rank-kill-ddp", fired: bool = True) -> Journal:
    recovery = {"detect_s": 0.1, "restart_s": 2.0, "resume_s": resume_s, "regain_s": resume_s + 0.5,
                "lost_steps": 5} if fired else {}
    return Journal.model_validate({
        "experiment": name, "exit_code": exit_code, "wall_s": wall_s, "run_dir": path,
        "faults": [{"index": 0, "kind": "kill-rank", "label": "kill-rank#0", "t_inject": 1.0, "recovery": recovery}],
        "checkpoints": {"saves": 6, "save_s_median": save_s, "bytes_median": 1000}})


def baseline_of(*journals: Journal) -> dict:
    return build_baseline(list(journals))


def test_figures_are_flat_and_named_by_fault() -> None:
    figs = figures_of(journal())
    assert figs["kill-rank#0.resume_s"] == 3.0 and figs["ckpt.save_s"] == 0.04 and figs["wall_s"] == 15.0
    assert figs["kill-rank#0.lost_steps"] == 5 and figs["ckpt.bytes"] == 1000


def test_badput_is_a_figure_when_the_run_could_be_split() -> None:
    split = {"wall_s": 15.0, "seconds": {"productive": 9.5, "restart": 4.0}, "problems": []}
    assert figures_of(journal().model_copy(update={"goodput": split}))["badput_s"] == 5.5
    unsplit = {**split, "problems": ["no step events"]}
    assert "badput_s" not in figures_of(journal().model_copy(update={"goodput": unsplit}))


def test_jitter_within_the_baselines_spread_is_not_a_regression() -> None:
    base = baseline_of(journal(3.0, path="a"), journal(3.9, path="b"), journal(3.2, path="c"))
    result = compare("rank-kill-ddp", [journal(4.1, save_s=0.2, wall_s=17.0)], base)
    assert result is not None and result.regressions == [], [c.describe() for c in result.regressions]


def test_a_slowed_checkpoint_save_regresses_and_is_named() -> None:
    base = baseline_of(journal(path="runs/base-1"), journal(path="runs/base-2"))
    result = compare("rank-kill-ddp", [journal(save_s=1.05), journal(save_s=1.02), journal(save_s=0.04)], base)
    [regressed] = result.regressions
    assert regressed.figure == "ckpt.save_s"
    assert "ckpt.save_s 1.02 vs baseline 0.04" in regressed.describe()
    assert "median of 3 run(s) vs 2" in regressed.describe()
    assert result.baseline_runs == ["runs/base-1", "runs/base-2"]
    md = markdown_summary([result])
    assert "| rank-kill-ddp | ckpt.save_s | 1.02 | 0.04 |" in md and "**REGRESSED**" in md


def test_a_figure_that_no_longer_happens_is_missing_not_ignored() -> None:
    base = baseline_of(journal())
    result = compare("rank-kill-ddp", [journal(fired=False)], base)
    assert "kill-rank#0.resume_s" in result.missing
    assert "**MISSING**" in markdown_summary([result])


def test_failed_runs_make_no_baseline() -> None:
    with pytest.raises(UsageError, match="passing runs only"):
        build_baseline([journal(exit_code=1)])
    base = baseline_of(journal(path="good"), journal(resume_s=99.0, exit_code=1, path="bad"))
    assert base["experiments"]["rank-kill-ddp"]["runs"] == ["good"]


def test_unknown_experiment_is_not_gated() -> None:
    assert compare("other", [journal(name="other")], baseline_of(journal())) is None


def test_bad_baseline_files_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="chaos baseline save"):
        load_baseline(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UsageError, match="not a readable baseline"):
        load_baseline(tmp_path / "bad.json")
    (tmp_path / "old.json").write_text(json.dumps({"version": 0}))
    with pytest.raises(UsageError, match="version 1"):
        load_baseline(tmp_path / "old.json")


def test_baseline_save_cli_writes_a_loadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    for i in range(2):
        (runs / f"r{i}").mkdir(parents=True)
        journal(resume_s=3.0 + i).write(runs / f"r{i}")
    out = tmp_path / "gate" / "baseline.json"
    assert main(["baseline", "save", str(runs), "-o", str(out)]) == 0
    base = load_baseline(out)
    assert base["experiments"]["rank-kill-ddp"]["figures"]["kill-rank#0.resume_s"] == [3.0, 4.0]
    assert "rank-kill-ddp: 2 run(s)" in capsys.readouterr().out
    assert main(["baseline", "save", str(tmp_path / "nothing"), "-o", str(out)]) == 2


def test_run_refuses_a_bad_baseline_before_running(tmp_path: Path) -> None:
    exp = Path(__file__).resolve().parents[3] / "experiments" / "baseline-ddp.yaml"
    assert main(["run", str(exp), "--baseline", str(tmp_path / "missing.json"), "--runs-dir", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


# Issue 39: only what the stack did is gated; a missing experiment is not silently ungated.
def test_where_the_fault_landed_is_reported_not_gated() -> None:
    def landed(at: int) -> Journal:
        j = journal()
        j.faults[0].recovery.update(lost_steps=0, landed_step=at, trigger_step=17, durable_step=15,
                                          steps_since_ckpt=at - 15)
        return j

    base = baseline_of(landed(17), landed(18), landed(17))
    assert "kill-rank#0.steps_since_ckpt" not in figures_of(landed(24))
    result = compare("rank-kill-ddp", [landed(24)], base)  # 9 steps past the checkpoint: timing, not the stack
    assert not result.failed, [ch.describe() for ch in result.regressions]
    older = landed(24)
    older.faults[0].recovery["lost_steps"] = 5  # resumed from a checkpoint older than the newest durable one
    assert [ch.figure for ch in compare("rank-kill-ddp", [older], base).regressions] == ["kill-rank#0.lost_steps"]


def test_an_experiment_absent_from_the_baseline_fails_the_gate_unless_allowed() -> None:
    from chaos.report.baseline import absent

    refused, allowed = absent("renamed-kill"), absent("renamed-kill", allow_new=True)
    assert refused.failed and not allowed.failed
    assert "--allow-new" in refused.absent_message("gate/baseline.json")
    assert "chaos baseline save" in refused.absent_message("gate/baseline.json")
    md = markdown_summary([refused])
    assert "**NOT IN BASELINE**" in md and "1 experiment(s) not in the baseline** (renamed-kill)" in md
    assert "not gated (--allow-new)" in markdown_summary([allowed])


def test_a_baseline_saved_before_lost_steps_changed_meaning_is_stale_not_missing() -> None:
    old = baseline_of(journal())
    del old["meaning"]  # saved when lost_steps counted the fault's timing too
    now = journal()
    del now.faults[0].recovery["lost_steps"]  # no ckpt_commit: the durable checkpoint is unknown
    result = compare("rank-kill-ddp", [now], old)
    assert result.stale == ["kill-rank#0.lost_steps"] and not result.missing and not result.failed
    assert compare("rank-kill-ddp", [now], baseline_of(journal())).missing == ["kill-rank#0.lost_steps"]


def test_run_with_a_baseline_that_lacks_the_experiment_fails_unless_allowed(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    fake = Path(__file__).resolve().parents[2] / "fixtures" / "fake_torchrun.py"
    exp = tmp_path / "renamed.yaml"
    exp.write_text(f"""name: renamed-gate
workload:
  command: [{sys.executable}, {fake}, --nproc, "1", --steps, "3", --ckpt-every, "5", --step-sleep, "0.01"]
checks:
  - completes: {{max_restarts: 0, min_step: 3}}
timeout_s: 60
""")
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(baseline_of(journal())))
    junit = tmp_path / "gate.xml"
    assert main(["run", str(exp), "--runs-dir", str(tmp_path / "runs"), "--baseline", str(baseline),
                 "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "NOT IN BASELINE" in out and "--allow-new" in out
    assert "no baseline for renamed-gate" in junit.read_text()
    assert main(["run", str(exp), "--runs-dir", str(tmp_path / "runs"), "--baseline", str(baseline),
                 "--allow-new"]) == 0


def _at(speed: float | None, **kw) -> Journal:
    return journal(**kw).model_copy(update={"host_speed": {"probe_s": speed}})


def test_an_unchanged_script_on_a_slower_host_is_compared_at_the_baselines_speed() -> None:
    """Issue 39: restarts and resumes move with the host's speed; 1.5x slower everywhere is no regression."""
    base = baseline_of(_at(0.05, resume_s=2.0, wall_s=10.0, path="a"), _at(0.05, resume_s=2.1, wall_s=10.2, path="b"),
                       _at(0.05, resume_s=2.0, wall_s=10.1, path="c"))
    slow = [_at(0.075, resume_s=3.05, wall_s=15.2)]  # 1.5x: the most the gate scales
    assert compare("rank-kill-ddp", [journal(resume_s=3.05, wall_s=15.2)], base).regressions, \
        "as measured, the slow hour looks like a regression (the false alarm this fixes)"
    result = compare("rank-kill-ddp", slow, base)
    assert result.regressions == [], [c.describe() for c in result.regressions]
    resume = next(c for c in result.changes if c.figure == "kill-rank#0.resume_s")
    assert resume.now == pytest.approx(3.05 / 1.5) and resume.measured == pytest.approx(3.05)
    assert "1.50x slower" in result.speed
    # Steps and bytes are never scaled.
    assert next(c for c in result.changes if c.figure == "ckpt.bytes").now == 1000


def test_a_real_regression_is_caught_at_any_host_speed() -> None:
    base = baseline_of(*(_at(0.05, resume_s=2.0, save_s=0.02, path=p) for p in "abc"))
    # A restore 3 s slower, on a host the probe says is 1.3x slower: still over the bound.
    result = compare("rank-kill-ddp", [_at(0.065, resume_s=5.0 * 1.3)], base)
    assert any(c.figure == "kill-rank#0.resume_s" for c in result.regressions)
    # A probe that lies (claims the host was 10x slower) cannot hide more than a 1.5x slowdown.
    lied = compare("rank-kill-ddp", [_at(0.5, resume_s=7.0, save_s=1.02)], base)
    assert {c.figure for c in lied.regressions} >= {"kill-rank#0.resume_s", "ckpt.save_s"}
    # A faster host makes the gate no looser: the same figure, scaled up.
    fast = compare("rank-kill-ddp", [_at(0.025, resume_s=2.0)], base)
    assert "2.00x faster" in fast.speed
    assert next(c for c in fast.changes if c.figure == "kill-rank#0.resume_s").now == pytest.approx(3.0)


def test_without_a_probe_on_either_side_figures_are_compared_as_measured_and_it_says_so() -> None:
    old = baseline_of(journal(path="a"), journal(path="b"))
    result = compare("rank-kill-ddp", [_at(0.5, resume_s=3.0)], old)
    assert "as measured" in result.speed and "re-save" in result.speed
    assert next(c for c in result.changes if c.figure == "kill-rank#0.resume_s").now == 3.0
    new = baseline_of(_at(0.05, path="a"), _at(0.05, path="b"))
    result = compare("rank-kill-ddp", [journal(resume_s=3.0)], new)
    assert "a run has no host-speed probe" in result.speed
    assert "as measured" in markdown_summary([result])
    # One baseline run without the probe: the baseline is not scaled at all (its runs would be at mixed speeds).
    mixed = baseline_of(_at(0.05, path="a"), journal(path="b"))
    assert "at_reference_speed" not in mixed["experiments"]["rank-kill-ddp"]
