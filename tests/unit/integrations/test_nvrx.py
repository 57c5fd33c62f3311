"""chaos.integrations.nvrx: a heartbeat to ft_launcher's rank monitor after every reported step, its timeouts journaled."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos import sdk

ft = pytest.importorskip("nvidia_resiliency_ext.fault_tolerance", reason="pip install -e '.[nvrx]' (or '.[dev]')")
nvrx = pytest.importorskip("chaos.integrations.nvrx")


class FakeClient:
    """What the adapter uses of RankMonitorClient; the real one needs the monitor ft_launcher starts."""

    def __init__(self) -> None:
        self.beats = 0
        self.closed = False
        self.hb_timeouts = SimpleNamespace(initial=60.0, subsequent=5.0)

    def init_workload_monitoring(self) -> None:
        pass

    def send_heartbeat(self) -> None:
        self.beats += 1

    def shutdown_workload_monitoring(self) -> None:
        self.closed = True


def test_one_heartbeat_at_start_and_one_per_step_until_stopped(events: Path, records, monkeypatch) -> None:
    client = FakeClient()
    monkeypatch.setattr(ft, "RankMonitorClient", lambda: client)
    beats = nvrx.Heartbeats.start()
    [monitor] = records(events, "monitor")
    assert (monitor["source"], monitor["initial_s"], monitor["subsequent_s"]) == ("nvrx", 60.0, 5.0)
    assert client.beats == 1
    for step in (1, 2, 3):
        sdk.step(step, epoch=0, samples=[step], loss=0.0)
    assert client.beats == 4
    beats.stop()
    sdk.step(4, epoch=0, samples=[4], loss=0.0)
    assert client.beats == 4 and client.closed


def test_outside_ft_launcher_it_says_how_to_launch(events: Path, monkeypatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    with pytest.raises(RuntimeError, match="ft_launcher"):
        nvrx.Heartbeats.start()
