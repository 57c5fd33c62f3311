"""The run directory: its unique name, and reading what the workload printed into it (output.log)."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.errors import UsageError
from chaos.runtime.clock import SYSTEM, Clock

if TYPE_CHECKING:
    from chaos.runtime.context import RunContext


def stamp(clock: Clock) -> str:
    """The time in a run directory's name, on the run's clock."""
    return datetime.fromtimestamp(clock.wall()).strftime("%Y%m%d-%H%M%S")


def new_run_dir(runs_root: Path, name: str, clock: Clock = SYSTEM) -> Path:
    """``runs/<name>-<time>``, unique even for parallel runs started in the same second."""
    when = stamp(clock)
    runs_root.mkdir(parents=True, exist_ok=True)
    for i in range(1000):
        suffix = f"-{i}" if i else ""
        path = runs_root / f"{name}-{when}-{os.getpid()}{suffix}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise UsageError(f"cannot create a run directory under {runs_root}")


class LineTail:
    """The lines a growing file gained since the last poll (a partial last line waits for its end)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""

    def poll(self) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        text = self.partial + data.decode(errors="replace")
        lines = text.split("\n")
        self.partial = lines.pop()
        return lines


def tail_text(path: Path, n: int = 4000) -> str:
    """The last ``n`` bytes of a file as text, or "" when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-n:].decode(errors="replace")


def regex_steps(run: "RunContext", out_tail: LineTail, step_re: re.Pattern, newest: str | None) -> list[dict]:
    """The steps a workload that does not speak the protocol printed since the last poll (workload.step_regex)."""
    # Seen from outside: a step line belongs to the newest attempt the harness saw spawn (the
    # output of a killed attempt is flushed before its successor has imported torch).
    attempt = newest or f"{run.launch_no}.0"
    recs = []
    for line in out_tail.poll():
        m = step_re.search(line)
        if m:
            try:
                step = int(m.group("step") if "step" in step_re.groupindex else m.group(1))
            except (IndexError, ValueError):
                continue
            recs.append(run.log("step", step=step, source="output", attempt=attempt))
    return recs
