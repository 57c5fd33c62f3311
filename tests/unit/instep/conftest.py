"""What the in-step tests share: chaos.sdk writing this test's events to a folder of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from chaos import sdk


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "events"
    monkeypatch.setenv(sdk.EVENTS_DIR_ENV, str(folder))
    monkeypatch.setattr(sdk, "_writer", None, raising=False)
    monkeypatch.setattr(sdk, "_last_step", [None])
    yield folder

