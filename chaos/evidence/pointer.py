"""The checkpoint pointer watched as it moves: what ``latest`` names is judged the moment it names it.

A pointer that moves before its checkpoint is whole is invisible at the end of a run: the data
arrives a second later and a final scan finds it complete. It is fatal only after a crash in that
second, when the resume trusts the pointer and loads a torn file, so a test that waits for the crash
tests the pointer by luck. The harness watches the pointer itself instead: a thread of the harness
stats it every few milliseconds (polling, not inotify: inotify sees nothing on NFS or a FUSE mount,
where checkpoints live) and, the moment it names something new, takes a look at what it names:

* a directory with a ``MANIFEST.json`` (the reference workloads' commit record): every listed file
  present at its listed size and, up to ``hash_budget_bytes`` in all, its checksum (over the budget: sizes
  only, ``hashed`` false, which the check does not count as proof);
* a directory with a DCP ``.metadata`` and no manifest: sealed by its ``.metadata`` (DCP writes it
  last); its shards are not read at that moment (that needs torch); an empty directory is not whole;
* a single file: a zip archive (``torch.save``) whose central directory and CRCs check out;
* anything else, or a single file larger than the budget: not judged at that moment (``whole`` None),
  which the check never counts as proof.

Each move is a ``ckpt_pointer`` harness record (``whole``, ``problems``, how long the look took). The
look is taken on the original files, at that moment: a pin (hard links, as the witness makes) would
keep files from being deleted but not from being written into, and a pointer ahead of its data is
exactly a target still being written. A pointer moved twice within one poll interval shows its
second target only; each record says how long after the previous look it came (``lag_s``: the move
happened at most that long before it was judged, and a starved harness widens it), and the record of the
watch (``pointer_watch``) says how often it polled.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from chaos.checkpoint.findings import DCP_METADATA, step_of
from chaos.checkpoint.formats import _zip_crc  # zipfile only: no torch in the harness for a look
from chaos.checkpoint.manifest import MANIFEST_NAME, read_manifest, verify_manifest
from chaos.evidence.fs_ops import pointer_moves, read_ops

INTERVAL_S = 0.005
"""How often the pointer is stat'ed: a stat is microseconds, and a pointer ahead of its data is ahead for
as long as the data takes to write (milliseconds for the smallest checkpoint)."""
HASH_BUDGET_BYTES = 256 << 20
"""Checksums are read at the moment of a move up to this much data; a larger checkpoint is judged by its
files' presence and sizes, and says so (``hashed`` false)."""


def _identity(pointer: Path) -> tuple[int, int, int] | None:
    """What changes when the pointer is rewritten or re-linked (a rename gives a new inode)."""
    try:
        st = os.lstat(pointer)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


POINTER_MAX_BYTES = 4096
"""A pointer file is a short text naming an entry; anything larger (or binary) is a checkpoint in its own right."""


def read_pointer(pointer: Path) -> str | None:
    """The name the pointer holds: a symlink's target, or a short text file's one line. A file that is itself a
    checkpoint (Lightning's ``last.ckpt`` written whole, not linked) names itself: its replacement is the move, and
    it is judged as the checkpoint. None when unreadable or empty."""
    try:
        if pointer.is_symlink():
            return os.readlink(pointer)
        with open(pointer, "rb") as fh:
            head = fh.read(POINTER_MAX_BYTES + 1)
    except OSError:
        return None
    if not head:
        return None
    try:
        text = head.decode("utf-8").strip()
    except UnicodeDecodeError:
        return pointer.name
    if len(head) > POINTER_MAX_BYTES or "\x00" in text or "\n" in text or not text:
        return pointer.name
    return text


def judge_target(path: Path, hash_budget_bytes: int = HASH_BUDGET_BYTES) -> dict[str, Any]:
    """Whether the checkpoint at ``path`` is whole right now: ``whole`` True/False, or None (cannot be judged
    at a moment without a commit record this module reads); ``problems``; ``hashed`` (checksums read)."""
    if not path.exists():
        return {"whole": False, "problems": ["does not exist"], "hashed": False}
    if path.is_dir():
        if (path / MANIFEST_NAME).exists():
            try:
                listed = read_manifest(path)["files"]
            except ValueError as exc:
                return {"whole": False, "problems": [str(exc)], "hashed": False}
            size = sum(int(info.get("size") or 0) for info in listed.values())
            hashed = size <= hash_budget_bytes
            problems = verify_manifest(path, check_hashes=hashed)
            return {"whole": not problems, "problems": problems[:5], "hashed": hashed, "bytes": size}
        if (path / DCP_METADATA).exists():
            return {"whole": True, "problems": [], "hashed": False, "sealed_by": DCP_METADATA}
        if not any(path.iterdir()):
            return {"whole": False, "problems": ["an empty directory: nothing written yet"], "hashed": False}
        # A layout whose commit record this module does not read: whether it was finished cannot be told now.
        return {"whole": None, "hashed": False,
                "problems": [f"no commit record this harness reads ({MANIFEST_NAME}, {DCP_METADATA})"]}
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            zipped = fh.read(2) == b"PK"
    except OSError as exc:
        return {"whole": False, "problems": [f"unreadable: {exc.strerror}"], "hashed": False}
    if size == 0:
        return {"whole": False, "problems": ["empty file"], "hashed": False, "bytes": 0}
    if not zipped:
        return {"whole": None, "problems": ["not a zip archive: cannot be judged without loading it"], "hashed": False,
                "bytes": size}
    if size > hash_budget_bytes:
        return {"whole": None, "problems": [f"{size} bytes, over the budget for a look at the moment"],
                "hashed": False, "bytes": size}
    problems = _zip_crc(path)
    return {"whole": not problems, "problems": problems, "hashed": True, "bytes": size}


class PointerWatch:
    """Polls ``<ckpt_dir>/<name>`` in a thread from ``start`` to ``close``; logs each move as ``ckpt_pointer``."""

    def __init__(self, ckpt_dir: Path, log: Callable[..., Any], name: str = "latest",
                 interval_s: float = INTERVAL_S, hash_budget_bytes: int = HASH_BUDGET_BYTES,
                 oplog: Path | None = None) -> None:
        self.ckpt_dir = Path(ckpt_dir)
        self.oplog = oplog
        """Where the checkpoint filesystem records its changes, when it is the slow-storage mount (chaos.evidence.fs_ops)."""
        self.pointer = self.ckpt_dir / name
        self.name = name
        self._log = log
        self.interval_s = interval_s
        self.hash_budget_bytes = hash_budget_bytes
        self._last: tuple[int, int, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.polls = 0
        self.moves = 0
        self._max_gap_s = 0.0
        self._last_poll: float | None = None

    def start(self) -> None:
        self._log("pointer_watch", pointer=str(self.pointer), interval_s=self.interval_s, state="start")
        self._thread = threading.Thread(target=self._run, name="chaos-pointer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop polling, after one last look (a move in the last interval is not lost)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        try:
            self.poll()
        except Exception as exc:  # said, never swallowed: the check then has no end of the watch to rely on
            self._log("pointer_watch", pointer=str(self.pointer), state="error", error=f"{type(exc).__name__}: {exc}")
            return
        self._log("pointer_watch", pointer=str(self.pointer), state="end", polls=self.polls, moves=self.moves,
                  max_gap_s=round(self._max_gap_s, 4))
        if self.oplog is not None and self.oplog.exists():
            self._log("pointer_order", **order_of(self.oplog, self.name, self.ckpt_dir))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except Exception as exc:  # never let the watcher die silently: the record says it stopped
                self._log("pointer_watch", pointer=str(self.pointer), state="error",
                          error=f"{type(exc).__name__}: {exc}")
                return

    def poll(self) -> bool:
        """One look at the pointer; True (and a ``ckpt_pointer`` record) when it moved since the last."""
        self.polls += 1
        now = time.monotonic()
        # The move happened at most this long before this look: the window in which it could hide.
        lag = None if self._last_poll is None else now - self._last_poll
        self._last_poll = now
        if lag is not None:
            # The longest time between two looks: a stalled filesystem or a starved thread widens the window a move
            # can hide in, and the watch's end record says by how much.
            self._max_gap_s = max(self._max_gap_s, lag)
        ident = _identity(self.pointer)
        if ident is None or ident == self._last:
            return False
        self._last = ident
        target = read_pointer(self.pointer)
        t0 = time.monotonic()
        if target is None:
            fields: dict[str, Any] = {"whole": False, "problems": [f"'{self.name}' is empty or unreadable"],
                                      "hashed": False}
        elif not (self.ckpt_dir / target).resolve().is_relative_to(self.ckpt_dir.resolve()):
            fields = {"whole": False, "problems": [f"names {target}, outside the checkpoint directory"],
                      "hashed": False}
        else:
            fields = judge_target(self.ckpt_dir / target, self.hash_budget_bytes)
        self.moves += 1
        self._log("ckpt_pointer", pointer=self.name, target=target,
                  path=str(self.ckpt_dir / target) if target else None,
                  step=step_of(Path(target)) if target else None, look_s=round(time.monotonic() - t0, 4),
                  lag_s=round(lag, 4) if lag is not None else None, **fields)
        return True


MAX_LISTED = 5
"""Changes and unsynced files listed per move in a ``pointer_order`` record (all are counted)."""


def order_of(oplog: Path, name: str, ckpt_dir: Path) -> dict[str, Any]:
    """The ``pointer_order`` record of pointer ``name``: its every move as the filesystem's op log has it, at the
    operation that made it, with what changed under its target while it named it (chaos.evidence.fs_ops)."""
    ops, problem = read_ops(oplog)
    out: dict[str, Any] = {"pointer": name, "oplog": str(oplog), "ops": len(ops)}
    if problem is not None:
        return {**out, "error": problem}
    moves = []
    for m in pointer_moves(ops, "/" + name, [str(ckpt_dir.absolute()), os.path.realpath(ckpt_dir)]):
        moves.append({"t": m.op.t, "b": m.op.b, "e": m.op.e, "until": m.until, "op": m.op.op, "name": m.name,
                      "target": m.target, "changed": len(m.changed),
                      "changes": [{"op": o.op, "path": o.path, "t": o.t, **({"to": o.to} if o.to else {})}
                                  for o in m.changed[:MAX_LISTED]],
                      "unsynced": len(m.unsynced), "unsynced_files": m.unsynced[:MAX_LISTED]})
    return {**out, "moves": moves}


def watches_for(checks: list[Any], ckpt_dir: Path, log: Callable[..., Any],
                oplog: Path | None = None) -> list[PointerWatch]:
    """One watch per pointer the experiment's checks name (a check class with ``watches_pointer``); ``oplog``: where
    the checkpoint filesystem records its changes when it is the slow-storage mount."""
    from chaos.registry import CHECKS

    budgets: dict[str, float] = {}
    for c in checks:
        if getattr(CHECKS.get(c.kind), "watches_pointer", False):
            mb = float(getattr(c.config, "hash_budget_mb", HASH_BUDGET_BYTES / (1 << 20)))
            budgets[c.config.pointer] = max(mb, budgets.get(c.config.pointer, 0.0))
    return [PointerWatch(ckpt_dir, log, name, hash_budget_bytes=int(mb * (1 << 20)), oplog=oplog)
            for name, mb in sorted(budgets.items())]
