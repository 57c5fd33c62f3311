"""What the stacks' adapters wrote: chaos.sdk pointed at a temporary events directory, and its records read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from chaos import sdk


def read_records(events: Path, ev: str) -> list[dict]:
    return [r for f in sorted(events.glob("*.jsonl")) for line in f.read_text().splitlines()
            if (r := json.loads(line))["ev"] == ev]


@pytest.fixture
def records() -> Callable[[Path, str], list[dict]]:
    """``records(events_dir, "step")``: every record of that kind, file by file (test modules here cannot import)."""
    return read_records


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """chaos.sdk writes here for the test; ``redirect(path)`` points it elsewhere (a resumed run's own events)."""
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(str(tmp_path / "events"), host="h"))
    return tmp_path / "events"


@pytest.fixture
def redirect(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], Path]:
    def to(path: Path) -> Path:
        monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(str(path), host="h"))
        return path

    return to
