"""The on-disk ledger of undo actions: written before each action, replayed by reverts and ``chaos cleanup``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from chaos.runtime.clock import SYSTEM, Clock
from chaos.runtime.shell import Shell
from chaos.runtime.undo import Scope, Undo, UndoFormatError

LEDGER_NAME = "ledger.jsonl"


def state_dir() -> Path:
    """Where unfinished runs are registered, so ``chaos cleanup`` can find them from anywhere."""
    base = os.environ.get("CHAOS_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "chaos")
    return Path(base)


@dataclass
class Entry:
    id: int
    owner: str
    undo: Undo
    done: bool = False


@dataclass
class RevertFailure:
    owner: str
    action: str
    error: str


class Ledger:
    """Append-only JSONL: ``{"id", "owner", "undo"}`` before acting, ``{"done": id}`` after undoing.

    Each line is fsynced: the ledger exists to survive a SIGKILL of the harness. Every undo is checked
    against the run's scope (its directories, its PIDs) before it runs, so a damaged or hand-edited
    ledger cannot make ``chaos cleanup`` touch anything the run did not own.
    """

    def __init__(self, run_dir: str | os.PathLike[str], clock: Clock = SYSTEM) -> None:
        self.run_dir = Path(run_dir)
        self.clock = clock
        self.path = self.run_dir / LEDGER_NAME
        self._entries: dict[int, Entry] = {}
        self._closed = False
        self.dirs: list[Path] = []
        """Directories outside the run directory that the run also owns (a custom checkpoint directory)."""
        self.owner_pid: int | None = None
        self.owner_create_time: float | None = None
        self.unreadable: list[str] = []
        """Ledger lines that could not be understood (reported by ``chaos cleanup``, never acted on)."""
        if self.path.exists():
            self._replay()

    def _replay(self) -> None:
        for n, line in enumerate(self.path.read_text(errors="replace").splitlines(), 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a crash mid-write: it was never acted on
            if not isinstance(rec, dict):
                self.unreadable.append(f"line {n}: {line[:200]}")
                continue
            try:
                if "undo" in rec:
                    self._entries[int(rec["id"])] = Entry(int(rec["id"]), str(rec["owner"]),
                                                          Undo.from_json(rec["undo"]))
                elif "done" in rec and rec["done"] in self._entries:
                    self._entries[rec["done"]].done = True
                elif rec.get("opened"):
                    self.dirs = [Path(d) for d in rec.get("dirs", []) if isinstance(d, str)]
                    self.owner_pid, self.owner_create_time = rec.get("pid"), rec.get("create_time")
                elif rec.get("closed"):
                    self._closed = True
            except (KeyError, TypeError, ValueError, UndoFormatError) as exc:
                self.unreadable.append(f"line {n}: {exc}")

    def _append(self, record: dict[str, Any]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def open(self, dirs: list[Path] | None = None) -> None:
        """Register the run as unfinished until ``close``; ``dirs``: other directories the run owns."""
        self.dirs = [Path(d).resolve() for d in dirs or []]
        me = psutil.Process()
        self.owner_pid, self.owner_create_time = me.pid, me.create_time()
        active = state_dir() / "active"
        active.mkdir(parents=True, exist_ok=True)
        self._append({"opened": True, "t": self.clock.wall(), "pid": self.owner_pid,
                      "create_time": self.owner_create_time, "dirs": [str(d) for d in self.dirs]})
        (active / self._marker_name()).write_text(str(self.run_dir.resolve()))

    def _marker_name(self) -> str:
        return str(self.run_dir.resolve()).strip("/").replace("/", "__")

    @property
    def scope(self) -> Scope:
        return Scope((self.run_dir.resolve(), *self.dirs))

    def harness_alive(self) -> bool:
        """Is the harness that opened this ledger still running (so its run is live, not abandoned)?"""
        if not isinstance(self.owner_pid, int) or not isinstance(self.owner_create_time, (int, float)):
            return False
        try:
            proc = psutil.Process(self.owner_pid)
            return (abs(proc.create_time() - self.owner_create_time) < 0.01
                    and proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return False

    def push(self, owner: str, undo: Undo) -> int:
        """Record how to undo an action that is about to happen; returns its entry id."""
        entry_id = max(self._entries, default=0) + 1
        self._entries[entry_id] = Entry(entry_id, owner, undo)
        self._append({"id": entry_id, "owner": owner, "undo": undo.to_json(), "t": self.clock.wall()})
        return entry_id

    def pending(self, owner: str | None = None) -> list[Entry]:
        """Undo entries not yet done, newest first (the order to revert in)."""
        return [
            e for e in sorted(self._entries.values(), key=lambda e: -e.id)
            if not e.done and (owner is None or e.owner == owner or e.owner.startswith(owner + "/"))
        ]

    def revert(self, shell: Shell, owner: str | None = None) -> list[RevertFailure]:
        """Run every pending undo (of ``owner``), attempting all even when some fail.

        An undo outside the run's scope is refused, reported as a failure and marked done: no later
        cleanup will ever run it either, and an operator decides by hand.
        """
        failures: list[RevertFailure] = []
        scope = self.scope
        for entry in self.pending(owner):
            refusal = entry.undo.refusal(scope)
            if refusal is not None:
                failures.append(RevertFailure(entry.owner, entry.undo.describe(), refusal))
                entry.done = True
                self._append({"done": entry.id, "refused": refusal, "t": self.clock.wall()})
                continue
            try:
                entry.undo.run(shell)
            except Exception as exc:  # collect, keep going: one failed revert must not strand the rest
                failures.append(RevertFailure(entry.owner, entry.undo.describe(), str(exc)))
                continue
            entry.done = True
            self._append({"done": entry.id, "t": self.clock.wall()})
        return failures

    def leftovers(self, shell: Shell) -> list[tuple[Entry, str]]:
        """Every recorded action (done or not) that its own probe says is still in place."""
        out = []
        scope = self.scope
        for entry in sorted(self._entries.values(), key=lambda e: e.id):
            if entry.undo.refusal(scope) is not None:
                continue  # not the run's to touch, so not the run's leftover either (reported when refused)
            try:
                what = entry.undo.leftover(shell)
            except Exception as exc:  # a probe that cannot run is itself worth reporting
                what = f"could not check ({exc}); undo: {entry.undo.describe()}"
            if what is not None:
                out.append((entry, what))
        return out

    def close(self) -> None:
        """Mark the run finished (only when nothing is pending) and unregister it."""
        if self.pending():
            return
        self._append({"closed": True, "t": self.clock.wall()})
        self._closed = True
        (state_dir() / "active" / self._marker_name()).unlink(missing_ok=True)

    @property
    def closed(self) -> bool:
        return self._closed


def unfinished_runs() -> list[Path]:
    """Run directories registered as active whose ledger was never closed."""
    active = state_dir() / "active"
    out = []
    for marker in sorted(active.glob("*")) if active.exists() else []:
        try:
            run_dir = Path(marker.read_text().strip())
        except (OSError, UnicodeDecodeError):
            continue
        if not (run_dir / LEDGER_NAME).exists():
            marker.unlink(missing_ok=True)
            continue
        if not Ledger(run_dir).closed:
            out.append(run_dir)
        else:
            marker.unlink(missing_ok=True)
    return out
