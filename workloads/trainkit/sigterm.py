"""SIGTERM as a flag the loop reads at the end of a step, with a bound on how long the loop may take to get there.

Python runs a signal handler in the main thread between two bytecodes: a rank blocked in C++ (a
collective that will never complete because its peer died or hung in it) never runs it, and holds its
launcher until the launcher's own SIGKILL (torchrun waits 30 s; docs/instep.md measured it). So the
signal is also seen where it arrives: ``signal.set_wakeup_fd`` makes the interpreter's C handler write
the signal's number into a pipe at once, whatever the main thread is doing, and a thread reading that
pipe sets the flag and starts the grace timer. The loop cancels the timer once every rank has agreed
to stop (the save that follows is not bounded), and a periodic save holds it (``saving``): a rank
that is saving is not stuck, and the timer starts its grace again when the save ends. A rank that
never gets to the end of its step exits when the grace runs out.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

log = logging.getLogger("trainkit")


def _forget_wakeup_fd() -> None:
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread of the child: nothing to undo there
        pass


class SigtermWatch:
    def __init__(self, grace_s: float, overdue: Callable[[], None]) -> None:
        self.flag = threading.Event()
        self.grace_s = grace_s
        self._overdue = overdue
        self._timer: threading.Timer | None = None
        # Reentrant: the main thread's Python handler may run while the main thread holds it.
        self._lock = threading.RLock()
        self._stopped = False
        self._saving = 0
        self._late = False

    def install(self) -> None:
        """From the main thread, before training: the handler, the wakeup pipe and its reader."""
        # The flag only: the timer is the reader thread's, which sees the signal even when this thread cannot.
        signal.signal(signal.SIGTERM, lambda signum, frame: self.flag.set())
        if self.grace_s <= 0:
            return
        read, write = os.pipe()
        os.set_blocking(write, False)  # the C handler must never block
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        # A forked child (a DataLoader worker) would inherit the wakeup fd: a SIGTERM sent to it (a loader
        # shutting its workers down) would reach this process's reader as if the rank had been told to stop.
        os.register_at_fork(after_in_child=_forget_wakeup_fd)
        threading.Thread(target=self._read, args=(read,), name="sigterm-watch", daemon=True).start()

    def _read(self, fd: int) -> None:
        while True:
            try:
                data = os.read(fd, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGTERM in data:
                self._seen()

    def _seen(self) -> None:
        self.flag.set()
        with self._lock:
            if self.grace_s > 0 and self._timer is None and not self._stopped:
                self._arm()

    def _arm(self) -> None:
        self._timer = threading.Timer(self.grace_s, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            if self._saving:
                self._late = True  # a fresh grace once the save is done
                return
        self._overdue()

    @contextmanager
    def saving(self) -> Iterator[None]:
        """Around a save: a rank that is writing its checkpoint is not stuck."""
        with self._lock:
            self._saving += 1
        try:
            yield
        finally:
            with self._lock:
                self._saving -= 1
                if not self._saving and self._late and not self._stopped:
                    self._late = False
                    self._arm()

    def reached_stop(self) -> None:
        """Every rank agreed to stop at this step: no bound on the save that follows."""
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()

    def is_set(self) -> bool:
        return self.flag.is_set()
