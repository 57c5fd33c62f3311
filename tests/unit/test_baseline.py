"""Baselines: figures from journals, noise-aware bounds, regressions named by figure, and the CLI around them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.baseline import build_baseline, compare, figures_of, load_baseline, markdown_summary
from chaos.cli import main
from chaos.errors import UsageError


def journal(resume_s: float = 3.0, save_s: float = 0.04, wall_s: float = 15.0, exit_code: int = 0,
            path: str = "runs/x", name: str = "rank-kill-ddp", fired: bool = True) -> dict:
    recovery = {"detect_s": 0.1, "restart_s": 2.0, "resume_s": resume_s, "regain_s": resume_s + 0.5,
                "lost_steps": 5} if fired else {}
    return {"experiment": name, "exit_code": exit_code, "wall_s": wall_s, "_path": path,
            "faults": [{"label": "kill-rank#0", "recovery": recovery}],
            "checkpoints": {"saves": 6, "save_s_median": save_s, "bytes_median": 1000}}


def baseline_of(*journals: dict) -> dict:
    return build_baseline(list(journals))


def test_figures_are_flat_and_named_by_fault() -> None:
    figs = figures_of(journal())
    assert figs["kill-rank#0.resume_s"] == 3.0 and figs["ckpt.save_s"] == 0.04 and figs["wall_s"] == 15.0
    assert figs["kill-rank#0.lost_steps"] == 5 and figs["ckpt.bytes"] == 1000


def test_badput_is_a_figure_when_the_run_could_be_split() -> None:
    split = {"wall_s": 15.0, "seconds": {"productive": 9.5, "restart": 4.0}, "problems": []}
    assert figures_of({**journal(), "goodput": split})["badput_s"] == 5.5
    unsplit = {**split, "problems": ["no step events"]}
    assert "badput_s" not in figures_of({**journal(), "goodput": unsplit})


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
        data = journal(resume_s=3.0 + i)
        del data["_path"]
        (runs / f"r{i}" / "journal.json").write_text(json.dumps(data))
    out = tmp_path / "gate" / "baseline.json"
    assert main(["baseline", "save", str(runs), "-o", str(out)]) == 0
    base = load_baseline(out)
    assert base["experiments"]["rank-kill-ddp"]["figures"]["kill-rank#0.resume_s"] == [3.0, 4.0]
    assert "rank-kill-ddp: 2 run(s)" in capsys.readouterr().out
    assert main(["baseline", "save", str(tmp_path / "nothing"), "-o", str(out)]) == 2


def test_run_refuses_a_bad_baseline_before_running(tmp_path: Path) -> None:
    exp = Path(__file__).resolve().parents[2] / "experiments" / "baseline-ddp.yaml"
    assert main(["run", str(exp), "--baseline", str(tmp_path / "missing.json"), "--runs-dir", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())
