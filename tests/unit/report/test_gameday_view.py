"""The live view draws a game day's state without a terminal, and keeps its goodput figure cheap."""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console

from chaos.commands.gameday import LiveView
from chaos.evidence.events import History
from chaos.spec.load import load_experiment
from chaos.evidence.outcome import FaultRecord
from chaos.run.progress import LiveState

ROOT = Path(__file__).resolve().parents[3]


def test_the_view_shows_progress_faults_and_goodput() -> None:
    exp = load_experiment(ROOT / "experiments" / "gameday-smoke-ddp.yaml")
    now = time.time()
    steps = [{"ev": "step", "t": now - 10 + i * 0.5, "attempt": "0.0", "rank": 0, "step": i + 1, "epoch": 0}
             for i in range(18)]
    history = History([{"ev": "start", "t": now - 11, "attempt": "0.0", "rank": 0}, *steps])
    struck = FaultRecord(index=0, kind="kill-rank", label="software#1", t_inject=now - 1)
    view = LiveView(exp)
    state = LiveState(12.0, 18, "0.0", history, [struck], [("gpu#2", "in_training {...}")])
    console = Console(file=io.StringIO(), width=140)
    console.print(view.render(state))
    text = console.file.getvalue()
    assert "step 18" in text and "software#1" in text and "gpu#2" in text and "goodput so far" in text
    first = view.split(state)
    assert view.split(LiveState(13.0, 18, "0.0", history, [struck], [])) is first  # not recomputed every poll
