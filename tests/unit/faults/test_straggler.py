"""straggler's duty cycle and hang-rank's SIGCONT-before-SIGSTOP, against fake processes (no real signals, no sleeps)."""

from __future__ import annotations

import signal

import psutil

from chaos.faults.straggler import DutyCycle


class FakeProc:
    def __init__(self, dies_after: int | None = None) -> None:
        self.pid = 4242
        self.sent: list[signal.Signals] = []
        self.dies_after = dies_after

    def send_signal(self, sig: signal.Signals) -> None:
        if self.dies_after is not None and len(self.sent) >= self.dies_after:
            raise psutil.NoSuchProcess(self.pid)
        self.sent.append(sig)


def test_cycle_alternates_stop_and_cont_and_always_ends_continued() -> None:
    proc = FakeProc()
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) >= 5  # "stop requested" during the 5th wait (a stopped phase)

    cycle = DutyCycle(proc, stopped_s=0.3, running_s=0.7, wait=wait)
    cycle._loop()
    assert waits == [0.3, 0.7, 0.3, 0.7, 0.3]
    assert proc.sent == [signal.SIGSTOP, signal.SIGCONT] * 2 + [signal.SIGSTOP, signal.SIGCONT]
    assert cycle.cycles == 2


def test_cycle_ends_quietly_when_the_rank_dies() -> None:
    proc = FakeProc(dies_after=3)
    cycle = DutyCycle(proc, stopped_s=0.1, running_s=0.1, wait=lambda s: False)
    cycle._loop()
    assert proc.sent == [signal.SIGSTOP, signal.SIGCONT, signal.SIGSTOP]


def test_hang_rank_registers_sigcont_before_stopping(net_run, monkeypatch) -> None:
    from chaos.faults import hang_rank
    from chaos.runtime.processes import Worker

    run, seq = net_run
    worker = Worker(pid=4242, create_time=1.0, rank=1, local_rank=0, restart_count=0, node="node1")
    monkeypatch.setattr(hang_rank, "select_workers", lambda run, rank, node: [worker])
    monkeypatch.setattr(hang_rank, "signal_workers",
                        lambda run, workers, sig: seq.append(("signal", sig.name)) or [w.pid for w in workers])
    details = hang_rank.HangRank(hang_rank.HangRankConfig(rank=1), index=0).inject(run)
    assert details["pids"] == [4242]
    assert seq == [("undo", "kill -CONT 4242"), ("signal", "SIGSTOP")]
