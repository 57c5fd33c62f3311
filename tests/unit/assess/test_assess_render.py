"""The card as the user reads it: report.md, report.html (self-contained, and rendered by a real browser), card.json."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from chaos.assess.card import card_dict, project, row_of
from chaos.assess.plan import Options, plan
from chaos.assess.render import COLOUR, markdown, write

from test_assess_card import ALL_PASS, journal
from test_assess_plan import seen


def card() -> dict:
    observation = seen()
    probes = plan(observation, Options(root=True))
    journals = {"rank-kill": journal(ALL_PASS),
                "nan": journal({"completes": "pass", "detection": "fail", "no_corrupt_commit": "fail"}, attempts=1)}
    rows = [row_of(p, journals.get(p.name) if p.runs else None, observation, f"experiments/x-{p.name}.yaml")
            for p in probes]
    rows = [r for r in rows if r.survived != "error"]  # the probes this card gave no journal
    scale, note = project(rows, journals, observation, 16384)
    return card_dict(observation, probes, rows, scale, note, "torchrun --nproc-per-node 2 train.py")


def test_the_card_is_written_whole_in_three_forms(tmp_path: Path) -> None:
    paths = write(card(), tmp_path)
    assert [p.name for p in paths] == ["card.json", "report.md", "report.html"]
    data = json.loads((tmp_path / "card.json").read_text())
    assert {r["probe"]: r["survived"] for r in data["rows"]} == {"rank-kill": "yes", "nan": "no", "preempt": "not run",
                                                                  "node-lost": "not run"}
    md = (tmp_path / "report.md").read_text()
    assert "| a rank dies between two saves | yes | 5 steps, 9.4 s | 9.5 s | PASS | PASS |" in md
    assert "Remedy: guard before the optimizer step" in md and "## At 16384 GPUs" in md
    html = (tmp_path / "report.html").read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_finding_with_a_pipe_stays_in_its_cell() -> None:
    c = card()
    c["rows"][0]["finding"] = "a | b"
    line = next(x for x in markdown(c).splitlines() if x.startswith("| a rank dies between"))
    assert "a \\| b" in line and line.count(" | ") == 6


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="needs chromium for the screenshot: apt-get install chromium (scripts/setup.sh does as root)")
def test_a_real_browser_renders_the_card_and_its_verdict_colours(tmp_path: Path) -> None:
    from matplotlib.image import imread

    write(card(), tmp_path)
    page = tmp_path / "report.html"
    shot = tmp_path / "shot.png"
    args = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1600"]
    subprocess.run([*args, f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=60)
    dom = subprocess.run([*args, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                         timeout=60).stdout
    assert "a rank dies between two saves" in dom and "At 16384 GPUs" in dom and 'id="observation"' in dom
    pixels = (imread(shot)[:, :, :3] * 255).round().astype(int)
    for word in ("yes", "no"):  # each survived badge is painted in its colour
        rgb = [int(COLOUR[word][i:i + 2], 16) for i in (1, 3, 5)]
        assert (abs(pixels - rgb).sum(axis=2) <= 6).mean() > 0.0001, word
