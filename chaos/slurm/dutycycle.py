"""A straggler's duty cycle run on a compute node by a job step: stops and continues one rank there until told to stop."""

from __future__ import annotations

import json
import signal as _signal
import subprocess
from pathlib import Path



class RemoteDutyCycle:
    """A straggler's duty-cycle step on a compute node; ``stop`` ends it (the step resumes the rank as it exits)."""

    def __init__(self, proc: subprocess.Popen, log: Path, stop_file: Path) -> None:
        self.proc = proc
        self.log = log
        self.stop_file = stop_file

    @property
    def cycles(self) -> int | None:
        """How many cycles the step did (its last line), once it ended; None when it said nothing."""
        for line in reversed(self.log.read_text(errors="replace").splitlines() if self.log.exists() else []):
            try:
                return int(json.loads(line)["cycles"])
            except (ValueError, KeyError, TypeError):
                continue
        return None

    def stop(self) -> None:
        """Ask the step to end (the stop file, seen within one period), then make sure it did: srun
        answers a SIGTERM by killing the step, which then cannot resume the rank (the ledger's
        SIGCONT step still does)."""
        self.stop_file.touch()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(_signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
