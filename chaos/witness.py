"""The harness's own look at each checkpoint the moment the workload commits or loads it.

Judging checkpoints only at the end of a run judges what retention left: the checkpoint a resume
actually loaded may be gone by then. The witness verifies a checkpoint when its ``ckpt_commit`` or
``ckpt_load`` is seen and writes a ``ckpt_verify`` record into harness.jsonl, so the checks can
judge what was loaded from evidence the harness gathered itself, not from what the workload says.

Verification runs on one background thread: hashing a large checkpoint must not hold up the
run loop that fires triggers and watches the process tree.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from chaos.checkpoint.verify import UnusableInput, verify

WATCHED = ("ckpt_commit", "ckpt_load")


class CheckpointWitness:
    """Verifies every committed or loaded checkpoint path once per (event, path), in the background."""

    def __init__(self, log: Callable[..., Any], *, verify_fn: Callable[..., Any] = verify) -> None:
        self._log = log
        self._verify = verify_fn
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chaos-witness")
        self._seen: set[tuple[str, str, str]] = set()
        self._pending: list[Future] = []

    def observe(self, records: list[dict[str, Any]]) -> None:
        for rec in records:
            ev, path = rec.get("ev"), rec.get("path")
            if ev not in WATCHED or not path or rec.get("source") == "harness":
                continue
            # Every rank logs the same load; one look per attempt is enough.
            key = (ev, os.path.realpath(str(path)), str(rec.get("attempt")))
            if key in self._seen:
                continue
            self._seen.add(key)
            self._pending.append(self._pool.submit(self._look, rec))

    def _look(self, rec: dict[str, Any]) -> None:
        path = Path(str(rec["path"]))
        fields: dict[str, Any] = {"path": str(path), "step": rec.get("step"), "seen": rec["ev"],
                                  "attempt": rec.get("attempt"), "t_event": rec.get("t")}
        try:
            report = self._verify(path, load=False)
        except UnusableInput as exc:
            gone = not os.path.lexists(path)
            fields.update(ok=None if gone else False, gone=gone, problems=[str(exc)])
        except Exception as exc:  # a verifier bug must not kill the run loop; say it, judge nothing from it
            fields.update(ok=None, gone=False, problems=[f"verifier crashed: {type(exc).__name__}: {exc}"])
        else:
            fields.update(ok=report.ok, gone=False, format=report.kind, problems=report.all_problems()[:5])
        self._log("ckpt_verify", **fields)

    def close(self) -> None:
        """Wait for every look under way (their records belong to this run's history), then stop."""
        for future in self._pending:
            future.exception()
        self._pool.shutdown(wait=True)
