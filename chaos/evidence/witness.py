"""The harness's own look at each checkpoint the moment the workload commits or loads it.

Judging checkpoints only at the end of a run judges what retention left: the checkpoint a resume
actually loaded may be gone by then. The witness verifies a checkpoint when its ``ckpt_commit`` or
``ckpt_load`` is seen and writes a ``ckpt_verify`` record into harness.jsonl, so the checks can
judge what was loaded from evidence the harness gathered itself, not from what the workload says.

The looks happen in a child process (``python -m chaos.evidence.witness``), not a thread: hashing a large
checkpoint, and the torch import a DCP ``.metadata`` needs, would hold the harness's GIL and delay
the run loop that fires triggers (a kill meant for 0.4 s into a save landed 1.2 s in). One child serves
the runs of a harness process one after another, so that import is paid once, not per run
(ci/bench/witness_child.py). The child reads requests on stdin and exits at end of input, so it dies
with a harness that was SIGKILLed.

A look can lag its event by seconds (the torch import alone takes 3 s of CPU, 4-9 s on a loaded
2-core box), and retention may prune the checkpoint meanwhile. So the child first *pins* what it
was asked to look at: hard links of its files, made the moment the request arrives (milliseconds;
no data is copied), in a directory of the run's own on the same filesystem. The look then reads
the pinned files, which a prune (a rename, then a delete) cannot take away; the pin is removed
after the look. Where no pin can be made (another filesystem), the look reads the original.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, Callable

WATCHED = ("ckpt_commit", "ckpt_load")
CLOSE_TIMEOUT_S = 120.0
"""How long the end of a run waits for looks still under way (a multi-GB checkpoint hashes in seconds)."""


def pin(path: Path, pin_dir: Path | None) -> Path | None:
    """Hard links of ``path`` (a file or a directory tree) under ``pin_dir``, keeping its name; None when
    it cannot be pinned whole (gone, mid-delete, another filesystem): the look then reads the original."""
    if pin_dir is None:
        return None
    slot: Path | None = None
    try:
        pin_dir.mkdir(parents=True, exist_ok=True)
        if os.stat(path).st_dev != os.stat(pin_dir).st_dev:
            return None
        slot = Path(tempfile.mkdtemp(dir=pin_dir))
        dest = slot / path.name
        if path.is_dir():
            # copytree with os.link as the copy: the tree's files, not their bytes.
            shutil.copytree(path, dest, copy_function=os.link, symlinks=True)
        else:
            os.link(path, dest)
        return dest
    except (OSError, shutil.Error):  # a file left between the listing and its link: not a whole checkpoint
        if slot is not None:
            shutil.rmtree(slot, ignore_errors=True)
        return None


def look(request: dict[str, Any], verify_fn: Callable[..., Any] | None = None, pinned: Path | None = None) -> dict[str, Any]:
    """Verify one checkpoint (its ``pinned`` links when given); the fields of its ``ckpt_verify`` record
    (ok None: gone, or unjudgeable)."""
    from chaos.checkpoint.verify import UnusableInput, verify

    verify_fn = verify_fn or verify
    original = Path(str(request["path"]))
    path = pinned or original
    scan = bool(request.pop("scan", False))
    fields = dict(request, pinned=pinned is not None)
    if scan:
        fields["values"] = _values(path)
    try:
        report = verify_fn(path, load=False)
    except UnusableInput as exc:
        gone = not os.path.lexists(path)
        fields.update(ok=None if gone else False, gone=gone, problems=[str(exc)])
    except Exception as exc:  # a verifier bug is no verdict on the checkpoint: say it, judge nothing from it
        fields.update(ok=None, gone=False, problems=[f"verifier crashed: {type(exc).__name__}: {exc}"])
    else:
        if not report.ok and not os.path.lexists(original):
            # Retention took it away while it was being read or pinned (a prune that deletes in place
            # can leave a pin with files missing): what failed may be a checkpoint leaving, not a
            # broken one. Judged as gone, which the check never counts as verified.
            fields.update(ok=None, gone=True, format=report.kind,
                          problems=["removed while being verified: " + "; ".join(report.all_problems()[:2])])
        else:
            fields.update(ok=report.ok, gone=False, format=report.kind, problems=report.all_problems()[:5])
    return fields


def _values(path: Path) -> dict[str, Any]:
    """The checkpoint's numbers scanned (chaos.checkpoint.values); a scan that could not run says why."""
    from chaos.checkpoint.values import scan

    try:
        return scan(path)
    except Exception as exc:
        return {"tensors": 0, "values": 0, "nonfinite": 0, "bad": [],
                "unscanned": [f"scan failed: {type(exc).__name__}: {exc}"[:200]]}


class _Child:
    """The witness child of this harness process, shared by its runs one after another.

    A look at a DCP ``.metadata`` or a weights-only load needs torch, whose import costs the child about
    2 CPU-s: paid once per harness process (a ``chaos run`` of many experiments, a pytest worker) instead
    of once per run. Each request carries an id the child echoes, so every answer goes back to the run
    that asked; a child that dies fails what it still owed (those looks are logged as unavailable) and
    the next request starts a new one."""

    def __init__(self) -> None:
        # Its own session: a Ctrl-C meant for the harness must not cut a look short; it ends when its stdin does
        # (when this process exits, however it exits).
        self.proc = subprocess.Popen([sys.executable, "-m", "chaos.evidence.witness"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        self.lock = threading.Lock()
        self.owed: dict[int, tuple["CheckpointWitness", dict[str, Any]]] = {}
        self.next_id = 0
        self.reader = threading.Thread(target=self._read, name="chaos-witness", daemon=True)
        self.reader.start()

    def alive(self) -> bool:
        return self.proc.poll() is None and self.reader.is_alive()

    def send(self, owner: "CheckpointWitness", request: dict[str, Any]) -> None:
        """Raises OSError when the child is gone."""
        assert self.proc.stdin is not None
        with self.lock:
            rid = self.next_id
            self.next_id += 1
            self.owed[rid] = (owner, request)
            try:
                self.proc.stdin.write(json.dumps({**request, "rid": rid}) + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:  # ValueError: its stdin was closed
                del self.owed[rid]
                raise OSError(str(exc)) from exc

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                fields = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self.lock:
                owner, _ = self.owed.pop(fields.pop("rid", -1), (None, None))
            if owner is not None:
                owner._answer(fields)
        with self.lock:  # the child is gone: what it still owed is never coming
            lost, self.owed = list(self.owed.values()), {}
        for owner, request in lost:
            owner._lost(request, "witness child exited before its look")

    def shutdown(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int | None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=10)
        return self.proc.returncode


_shared: _Child | None = None
_shared_lock = threading.Lock()


def _child() -> _Child:
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive():
            _shared = _Child()
        return _shared


def shutdown() -> int | None:
    """End this process's witness child once its looks are done (at exit its stdin closes anyway); its exit code."""
    global _shared
    with _shared_lock:
        child, _shared = _shared, None
    return child.shutdown() if child is not None else None


class CheckpointWitness:
    """Sends every committed or loaded checkpoint path (once per event, path and attempt) to the witness child."""

    def __init__(self, log: Callable[..., Any], pin_dir: Path | None = None, scan_values: bool = False) -> None:
        self._log = log
        self._pin_dir = pin_dir
        self._scan = scan_values
        """Also scan every tensor for non-finite values (chaos.checkpoint.values), for the checks that need it."""
        self._seen: set[tuple[str, str, str, str]] = set()
        self._child: _Child | None = None
        self._done = threading.Condition()
        self._sent = 0
        self._answered = 0
        self._closed = False

    def observe(self, records: list[dict[str, Any]]) -> None:
        for rec in records:
            ev, path = rec.get("ev"), rec.get("path")
            if ev not in WATCHED or not path or rec.get("source") == "harness":
                continue
            # Every rank logs the same load; one look per attempt and step is enough. The step is in the key:
            # a workload that saves every step to the same path (latest.pt) commits a new checkpoint each time.
            key = (ev, os.path.realpath(str(path)), str(rec.get("attempt")), str(rec.get("step")))
            if key in self._seen:
                continue
            self._seen.add(key)
            self._send({"path": str(path), "step": rec.get("step"), "seen": ev, "attempt": rec.get("attempt"),
                        "t_event": rec.get("t"), **({"pin_dir": str(self._pin_dir)} if self._pin_dir else {}),
                        **({"scan": True} if self._scan else {})})

    def start(self) -> None:
        """Have the child ready now, while the workload starts up: started on the first commit instead, its own
        start-up (~1-3 s on a loaded 2-core box) let retention prune the first checkpoints before their look."""
        if self._child is None:
            self._child = _child()

    def _send(self, request: dict[str, Any]) -> None:
        with self._done:
            self._sent += 1
        for _ in range(2):  # a child found dead is replaced once
            try:
                if self._child is None or not self._child.alive():
                    self._child = _child()
                self._child.send(self, request)
                return
            except OSError as exc:
                error = exc
                self._child = None
        self._lost(request, f"witness unavailable: {error}")

    def _answer(self, fields: dict[str, Any]) -> None:
        with self._done:
            if not self._closed:
                self._log("ckpt_verify", **fields)
            self._answered += 1
            self._done.notify_all()

    def _lost(self, request: dict[str, Any], why: str) -> None:
        """A look that will never come (the child died): the check sees it as unavailable, never as verified."""
        fields = {k: v for k, v in request.items() if k not in ("pin_dir", "scan")}
        with self._done:
            if not self._closed:
                self._log("ckpt_verify", **fields, ok=None, gone=False, problems=[why])
            self._answered += 1
            self._done.notify_all()

    def close(self) -> None:
        """Wait for every look this run asked for (their records belong to its history), then let its pins go;
        the child stays for the next run of this process."""
        with self._done:
            self._done.wait_for(lambda: self._answered >= self._sent, timeout=CLOSE_TIMEOUT_S)
            if self._answered < self._sent:
                self._log("witness_incomplete", sent=self._sent, answered=self._answered)
            self._closed = True
        if self._pin_dir is not None and self._answered >= self._sent:
            shutil.rmtree(self._pin_dir, ignore_errors=True)


def serve(stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
    """The child's loop: one JSON request a line in, one ``ckpt_verify`` field set a line out.

    This thread reads and pins each request as it arrives; a second one looks, in order, however
    long the first look's imports take."""
    import chaos.checkpoint.verify  # noqa: F401  # before the first request, not during its look

    todo: queue.Queue[tuple[dict[str, Any], Path | None] | None] = queue.Queue()

    def looker() -> None:
        while (item := todo.get()) is not None:
            request, pinned = item
            try:
                fields = look({k: v for k, v in request.items() if k != "pin_dir"}, pinned=pinned)
            finally:
                if pinned is not None:
                    shutil.rmtree(pinned.parent, ignore_errors=True)
            stdout.write(json.dumps(fields, default=str) + "\n")
            stdout.flush()

    worker = threading.Thread(target=looker, name="chaos-witness-look")
    worker.start()
    pin_dirs: set[Path] = set()
    try:
        for line in stdin:
            try:
                request = json.loads(line)
            except json.JSONDecodeError:
                continue
            pin_dir = Path(request["pin_dir"]) if request.get("pin_dir") else None
            if pin_dir is not None:
                pin_dirs.add(pin_dir)
            todo.put((request, pin(Path(str(request["path"])), pin_dir)))
    finally:
        todo.put(None)
        worker.join()
        for d in pin_dirs:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    serve()
