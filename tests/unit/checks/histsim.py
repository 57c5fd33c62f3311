"""Synthetic histories for the check tests: a tiny simulated trainer that writes protocol records by hand.

A plain module (not conftest.py) so its name is unique across test folders when suites run together."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from chaos.checks.base import FaultRecord, RunOutcome
from chaos.evidence.events import History


class Cursor:
    """The reference global-cursor sampler in miniature: a seeded permutation per epoch, no drop_last."""

    def __init__(self, dataset_size: int) -> None:
        self.size = dataset_size
        self.epoch = 0
        self.offset = 0

    def permutation(self, epoch: int) -> list[int]:
        perm = list(range(self.size))
        random.Random(epoch).shuffle(perm)
        return perm

    def take(self, n: int) -> tuple[int, list[int]]:
        epoch, start = self.epoch, self.offset
        stop = min(start + n, self.size)
        self.offset = stop
        if self.offset >= self.size:
            self.epoch, self.offset = self.epoch + 1, 0
        return epoch, self.permutation(epoch)[start:stop]


class Sim:
    """Writes start/step/ckpt/final records as a DDP job would, with a clock that advances 1 s per record."""

    def __init__(self, dataset_size: int | None = 16, batch: int = 2) -> None:
        self.dataset_size = dataset_size
        self.batch = batch
        self.records: list[dict[str, Any]] = []
        self.t = 1000.0
        self.saved: dict[int, Cursor] = {}
        self.world: dict[str, int] = {}

    def emit(self, ev: str, attempt: str, rank: int, **fields: Any) -> dict[str, Any]:
        self.t += 1.0
        rec = {"ev": ev, "t": self.t, "mono": self.t, "pid": 100 + rank, "host": "h", "rank": rank,
               "world_size": self.world.get(attempt, 2), "attempt": attempt, **fields}
        self.records.append(rec)
        return rec

    def start(self, attempt: str, world: int = 2, load: int | None = 0, path: str | None = None) -> None:
        """Every rank starts and (unless ``load`` is None) logs its ckpt_load."""
        self.world[attempt] = world
        for rank in range(world):
            extra = {"dataset_size": self.dataset_size} if self.dataset_size is not None else {}
            self.emit("start", attempt, rank, local_rank=rank, device="cpu", **extra)
        if load is not None:
            self.load(attempt, load, path)

    def load(self, attempt: str, step: int, path: str | None = None) -> None:
        for rank in range(self.world[attempt]):
            self.emit("ckpt_load", attempt, rank, step=step, path=path if step or path else None)

    def train(self, attempt: str, first: int, last: int, cursor: Cursor, ckpt_every: int = 0) -> Cursor:
        """Steps ``first..last``; commits (rank 0) every ``ckpt_every`` steps, remembering the cursor."""
        world = self.world[attempt]
        for step in range(first, last + 1):
            epoch, batch = cursor.take(self.batch * world)
            for rank in range(world):
                self.emit("step", attempt, rank, step=step, epoch=epoch,
                          samples=batch[rank * self.batch:(rank + 1) * self.batch], loss=1.0 / step)
            if ckpt_every and step % ckpt_every == 0:
                self.commit(attempt, step)
                self.saved[step] = copy.deepcopy(cursor)
        return cursor

    def commit(self, attempt: str, step: int, path: str | None = None, reason: str | None = None) -> None:
        path = path or f"/ckpt/step_{step:06d}"
        self.emit("ckpt_begin", attempt, 0, step=step, path=path, **({"reason": reason} if reason else {}))
        self.emit("ckpt_commit", attempt, 0, step=step, path=path, bytes=10, seconds=0.1)

    def resume(self, step: int) -> Cursor:
        """The cursor as the checkpoint of ``step`` saved it."""
        return copy.deepcopy(self.saved[step])

    def final(self, attempt: str, step: int, digests: dict[int, str] | None = None) -> None:
        for rank in range(self.world[attempt]):
            self.emit("final", attempt, rank, step=step, digest=(digests or {}).get(rank, "d" * 64))

    def witness(self, seen: str, attempt: str, path: str, ok: bool | None, problems: list[str] | None = None) -> None:
        """A harness ``ckpt_verify`` of the last ``seen`` event of ``path`` in ``attempt``, as chaos.evidence.witness logs it."""
        event = [r for r in self.records if r["ev"] == seen and r["attempt"] == attempt and r.get("path") == path][-1]
        self.t += 1.0
        self.records.append({"ev": "ckpt_verify", "t": self.t, "mono": self.t, "pid": 1, "host": "h",
                             "source": "harness", "path": path, "step": event.get("step"), "seen": seen,
                             "attempt": attempt, "t_event": event["t"], "ok": ok, "gone": ok is None,
                             "format": "manifest", "problems": problems or []})

    def history(self) -> History:
        return History([dict(r) for r in self.records])


def make_outcome(history: History, *, args: dict[str, Any] | None = None, exit_code: int | None = 0,
                 timed_out: bool = False, faults: list[FaultRecord] | None = None,
                 golden: Callable[[], dict[str, Any]] | None = None, diagnostics: list[str] | None = None,
                 output_tail: str = "") -> RunOutcome:
    experiment = SimpleNamespace(workload=SimpleNamespace(args=args or {}), timeout_s=60.0, name="synthetic",
                                 gameday=None, schedule=[])
    return RunOutcome(experiment=experiment, run_dir=Path("/nonexistent"), ckpt_dir=Path("/nonexistent"),  # type: ignore[arg-type]
                      history=history, exit_code=exit_code, timed_out=timed_out, wall_s=12.0,
                      faults=faults or [], diagnostics=diagnostics or [], golden=golden, output_tail=output_tail)
