"""The reference workloads' SIGTERM watch: a flag for the loop, and a bound on how long the loop may take to reach it."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Iterator

import pytest
from trainkit.sigterm import SigtermWatch


@pytest.fixture
def restore() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGTERM, before)


def test_a_loop_that_never_reaches_the_end_of_its_step_is_ended_after_the_grace(restore: None) -> None:
    overdue = threading.Event()
    watch = SigtermWatch(0.3, overdue.set)
    watch.install()
    t0 = time.monotonic()
    os.kill(os.getpid(), signal.SIGTERM)
    assert overdue.wait(5.0), "the grace ran out and nothing ended the rank"
    assert watch.is_set() and time.monotonic() - t0 >= 0.3


def test_a_loop_that_agreed_to_stop_is_not_bounded_in_its_save(restore: None) -> None:
    overdue = threading.Event()
    watch = SigtermWatch(0.3, overdue.set)
    watch.install()
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + 5.0
    while not watch.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.reached_stop()
    assert not overdue.wait(0.6)


def test_grace_zero_waits_for_the_loop_however_long(restore: None) -> None:
    overdue = threading.Event()
    watch = SigtermWatch(0.0, overdue.set)
    watch.install()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # the Python handler runs in this (main) thread at the next bytecode
    assert watch.is_set() and not overdue.wait(0.3)


def test_a_rank_saving_is_not_stuck_and_gets_a_fresh_grace_after(restore: None) -> None:
    overdue = threading.Event()
    watch = SigtermWatch(0.2, overdue.set)
    watch.install()
    with watch.saving():
        os.kill(os.getpid(), signal.SIGTERM)
        assert not overdue.wait(0.5), "the grace ran out during a save"
    t0 = time.monotonic()
    assert overdue.wait(5.0) and time.monotonic() - t0 >= 0.15, "after the save, a fresh grace, then the end"


def test_a_sigterm_to_a_forked_child_is_not_the_ranks(restore: None) -> None:
    """A DataLoader worker forked from the rank inherits the wakeup fd; the rank's loader terminating it with
    SIGTERM must not read, in the rank, as the rank being told to stop."""
    overdue = threading.Event()
    watch = SigtermWatch(0.2, overdue.set)
    watch.install()
    pid = os.fork()
    if pid == 0:  # the child: told to stop, as a loader stops its workers
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        os._exit(0)
    os.waitpid(pid, 0)
    assert not overdue.wait(0.5) and not watch.is_set()
