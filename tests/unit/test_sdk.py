"""chaos.sdk: one whole JSON line per event, flushed as written, per process; nothing without the environment."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from chaos import sdk


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("CHAOS_LAUNCH", "0")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(str(tmp_path / "events"), host="h"))
    return tmp_path / "events"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(path.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_records_carry_the_protocol_fields_and_are_on_disk_at_once(events: Path) -> None:
    sdk.start(dataset_size=10, device="cpu")
    sdk.step(3, epoch=0, samples=[torch.tensor(4), 5], loss=torch.tensor(0.5).item())
    # Read back without closing anything: each line is already written (a SIGKILL now loses nothing).
    start, step = lines(events)
    assert (events / f"h-{os.getpid()}.jsonl").exists()
    for rec in (start, step):
        assert {"ev", "t", "mono", "pid", "host", "rank", "world_size", "attempt"} <= rec.keys()
        assert rec["rank"] == 1 and rec["world_size"] == 2 and rec["attempt"] == "0.2"
    assert step["samples"] == [4, 5] and step["step"] == 3 and step["loss"] == 0.5


def test_a_forked_child_writes_its_own_file(events: Path) -> None:
    sdk.step(1, epoch=0, samples=(1,), loss=1.0)
    pid = os.fork()
    if pid == 0:
        sdk.step(2, epoch=0, samples=(2,), loss=1.0)
        os._exit(0)
    os.waitpid(pid, 0)
    files = sorted(events.glob("*.jsonl"))
    assert len(files) == 2
    assert sorted(rec["pid"] for rec in lines(events)) == sorted([os.getpid(), pid])


def test_without_the_environment_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(None))
    sdk.step(1, epoch=0, samples=[1], loss=1.0)
    assert not sdk.enabled() and not list(tmp_path.iterdir())


def test_digest_is_bit_exact_and_order_independent() -> None:
    a = {"w": torch.arange(4.0), "b": torch.zeros(2, dtype=torch.bfloat16)}
    b = {"b": torch.zeros(2, dtype=torch.bfloat16), "w": torch.arange(4.0)}
    assert sdk.digest_state(a) == sdk.digest_state(b)
    b["w"][0] = torch.nextafter(torch.tensor(0.0), torch.tensor(1.0))
    assert sdk.digest_state(a) != sdk.digest_state(b)
