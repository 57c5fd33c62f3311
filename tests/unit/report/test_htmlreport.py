"""report.html from a run directory: self-contained, every section present, and (with chromium) really rendered."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.commands.report import write_html
from chaos.spec.gameday import GamedayConfig, Scheduled
from chaos.gameday.summary import summarize
from chaos.report.html import COLOURS, VERDICT_COLOURS
from chaos.report.journal import Journal
from chaos.evidence.events import History
from chaos.evidence.outcome import FaultRecord


def rec(ev: str, t: float, attempt: str = "0.0", rank: int = 0, **kw) -> dict:
    return {"ev": ev, "t": t, "mono": t, "pid": 100 + rank, "host": "h", "rank": rank, "world_size": 2,
            "attempt": attempt, **kw}


def game_day_run(run_dir: Path) -> Journal:
    """A killed-and-resumed run written as the harness and a workload would, with its journal."""
    T = 1_700_000_000.0
    workload = [rec("start", T + 2, rank=r, dataset_size=16) for r in (0, 1)] + [rec("ckpt_load", T + 2.5, step=0)]
    for i in range(1, 21):
        workload += [rec("step", T + 2.5 + i * 0.5, rank=r, step=i, epoch=0, samples=[]) for r in (0, 1)]
        if i % 5 == 0:
            workload += [rec("ckpt_begin", T + 2.6 + i * 0.5, step=i, path=f"/c/{i}"),
                         rec("ckpt_commit", T + 2.7 + i * 0.5, step=i, path=f"/c/{i}", bytes=10, seconds=0.1)]
    workload += [rec("start", T + 18, "0.1", r, dataset_size=16) for r in (0, 1)]
    workload += [rec("ckpt_load", T + 18.5, "0.1", step=20, path="/c/20")]
    for i in range(21, 41):
        workload += [rec("step", T + 18.5 + (i - 20) * 0.5, "0.1", r, step=i, epoch=1, samples=[]) for r in (0, 1)]
        if i % 5 == 0:
            workload += [rec("ckpt_begin", T + 18.6 + (i - 20) * 0.5, "0.1", step=i, path=f"/c/{i}"),
                         rec("ckpt_commit", T + 18.7 + (i - 20) * 0.5, "0.1", step=i, path=f"/c/{i}")]
    workload += [rec("final", T + 29, "0.1", r, step=40, digest="d") for r in (0, 1)]
    harness = [{"ev": "launch", "t": T, "source": "harness"},
               {"ev": "worker_exit", "t": T + 14, "worker_pid": 100, "attempt": "0.0", "source": "harness"},
               {"ev": "worker_spawn", "t": T + 15, "worker_pid": 200, "attempt": "0.1", "source": "harness"},
               {"ev": "exit", "t": T + 30, "code": 0, "source": "harness"}]
    (run_dir / "events").mkdir(parents=True)
    (run_dir / "events" / "h-100.jsonl").write_text("".join(json.dumps(r) + "\n" for r in workload))
    (run_dir / "harness.jsonl").write_text("".join(json.dumps(r) + "\n" for r in harness))
    fault = FaultRecord(index=0, kind="kill-rank", label="software#1", t_inject=T + 13.1,
                        details={"pids": [101]}, optional=True, recovery={"regain_s": 6.0, "resume_s": 5.9})
    plan = GamedayConfig(gpus=1024, window_s=20)
    schedule = [Scheduled(at_s=12.0, real_h=30.0, cause="Software Bug", category="software",
                          fault={"name": "software#1"}, why="a crash of one rank (SIGABRT)")]
    experiment = SimpleNamespace(gameday=plan, schedule=schedule)
    checks = [{"kind": "fault_mix", "verdict": "pass", "reason": "1 of 1 drawn faults struck the job",
               "figures": {"categories": {"software": {"scheduled": 1, "injected": 1, "not_reached": 0,
                                                       "failed": 0, "mttr_s": 6.0}}}},
              {"kind": "exactly_once", "verdict": "pass", "reason": "each index once"}]
    return Journal.model_validate({
        "experiment": "gd-synthetic", "description": "a synthetic game day", "verdict": "PASS", "exit_code": 0,
        "wall_s": 30.0, "workload_exit_code": 0, "timed_out": False, "attempts": ["0.0", "0.1"], "max_step": 40,
        "diagnostics": [], "faults": [asdict(fault)], "checks": checks,
        **summarize(History.from_run_dir(run_dir), [fault], experiment)})


def test_the_page_is_self_contained_and_has_every_section(tmp_path: Path) -> None:
    journal = game_day_run(tmp_path)
    assert journal.projection["rows"] and journal.gameday["schedule"][0]["fired"]
    html = write_html(journal, tmp_path).read_text()
    for anchor in ("verdict", "checks", "timeline-img", "faults", "badput-img", "gameday", "projection"):
        assert f'id="{anchor}"' in html, anchor
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert "Young tau*" in html and "software#1" in html and "1,024 GPUs" in html


def test_an_old_journal_gets_its_goodput_computed_from_the_records(tmp_path: Path) -> None:
    journal = game_day_run(tmp_path)
    # The experiment file is no longer there.
    journal = journal.model_copy(update={"goodput": None, "gameday": None, "projection": None,
                                         "source": str(tmp_path / "gone.yaml")})
    html = write_html(journal, tmp_path).read_text()
    assert 'id="badput-img"' in html and 'id="projection"' not in html


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="needs chromium for the screenshot: apt-get install chromium (scripts/setup.sh does as root)")
def test_a_real_browser_renders_the_verdict_the_pictures_and_the_tables(tmp_path: Path) -> None:
    from matplotlib.image import imread

    page = write_html(game_day_run(tmp_path), tmp_path)
    shot = tmp_path / "shot.png"
    args = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,3200"]
    subprocess.run([*args, f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=60)
    dom = subprocess.run([*args, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                         timeout=60).stdout
    assert 'id="projection"' in dom and "gd-synthetic: PASS" in dom
    pixels = (imread(shot)[:, :, :3] * 255).round().astype(int)

    def share(colour: str) -> float:
        rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
        return float((abs(pixels - rgb).sum(axis=2) <= 6).mean())

    # The verdict banner paints the top of the page; the inlined badput picture paints its causes.
    top = pixels[:40]
    green = [int(VERDICT_COLOURS["PASS"][i:i + 2], 16) for i in (1, 3, 5)]
    assert (abs(top - green).sum(axis=2) <= 6).mean() > 0.5
    for cause in ("productive", "restart", "startup"):
        assert share(COLOURS[cause]) > 0.0005, cause
