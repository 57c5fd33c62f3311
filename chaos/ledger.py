"""The on-disk ledger of undo actions: written before each action, replayed by reverts and ``chaos cleanup``."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.shell import Shell
from chaos.undo import Undo

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

    Each line is fsynced: the ledger exists to survive a SIGKILL of the harness.
    """

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LEDGER_NAME
        self._entries: dict[int, Entry] = {}
        self._closed = False
        if self.path.exists():
            self._replay()

    def _replay(self) -> None:
        for line in self.path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a crash mid-write: it was never acted on
            if "undo" in rec:
                self._entries[rec["id"]] = Entry(rec["id"], rec["owner"], Undo.from_json(rec["undo"]))
            elif "done" in rec and rec["done"] in self._entries:
                self._entries[rec["done"]].done = True
            elif rec.get("closed"):
                self._closed = True

    def _append(self, record: dict[str, Any]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def open(self) -> None:
        """Register the run as unfinished until ``close``."""
        active = state_dir() / "active"
        active.mkdir(parents=True, exist_ok=True)
        (active / self._marker_name()).write_text(str(self.run_dir.resolve()))
        self._append({"opened": True, "t": time.time(), "pid": os.getpid()})

    def _marker_name(self) -> str:
        return str(self.run_dir.resolve()).strip("/").replace("/", "__")

    def push(self, owner: str, undo: Undo) -> int:
        """Record how to undo an action that is about to happen; returns its entry id."""
        entry_id = max(self._entries, default=0) + 1
        self._entries[entry_id] = Entry(entry_id, owner, undo)
        self._append({"id": entry_id, "owner": owner, "undo": undo.to_json(), "t": time.time()})
        return entry_id

    def pending(self, owner: str | None = None) -> list[Entry]:
        """Undo entries not yet done, newest first (the order to revert in)."""
        return [
            e for e in sorted(self._entries.values(), key=lambda e: -e.id)
            if not e.done and (owner is None or e.owner == owner or e.owner.startswith(owner + "/"))
        ]

    def revert(self, shell: Shell, owner: str | None = None) -> list[RevertFailure]:
        """Run every pending undo (of ``owner``), attempting all even when some fail."""
        failures: list[RevertFailure] = []
        for entry in self.pending(owner):
            try:
                entry.undo.run(shell)
            except Exception as exc:  # collect, keep going: one failed revert must not strand the rest
                failures.append(RevertFailure(entry.owner, entry.undo.describe(), str(exc)))
                continue
            entry.done = True
            self._append({"done": entry.id, "t": time.time()})
        return failures

    def close(self) -> None:
        """Mark the run finished (only when nothing is pending) and unregister it."""
        if self.pending():
            return
        self._append({"closed": True, "t": time.time()})
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
        run_dir = Path(marker.read_text().strip())
        if not (run_dir / LEDGER_NAME).exists():
            marker.unlink(missing_ok=True)
            continue
        if not Ledger(run_dir).closed:
            out.append(run_dir)
        else:
            marker.unlink(missing_ok=True)
    return out
