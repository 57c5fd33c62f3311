"""The harness's own look at each checkpoint the moment the workload commits or loads it.

Judging checkpoints only at the end of a run judges what retention left: the checkpoint a resume
actually loaded may be gone by then. The witness verifies a checkpoint when its ``ckpt_commit`` or
``ckpt_load`` is seen and writes a ``ckpt_verify`` record into harness.jsonl, so the checks can
judge what was loaded from evidence the harness gathered itself, not from what the workload says.

The looks happen in one child process (``python -m chaos.witness``), not a thread: hashing a large
checkpoint, and the torch import a DCP ``.metadata`` needs, would hold the harness's GIL and delay
the run loop that fires triggers (a kill meant for 0.4 s into a save landed 1.2 s in). The child
reads requests on stdin and exits at end of input, so it dies with a harness that was SIGKILLed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, Callable

WATCHED = ("ckpt_commit", "ckpt_load")
CLOSE_TIMEOUT_S = 120.0
"""How long the end of a run waits for looks still under way (a multi-GB checkpoint hashes in seconds)."""


def look(request: dict[str, Any], verify_fn: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Verify one checkpoint path; the fields of its ``ckpt_verify`` record (ok None: gone, or unjudgeable)."""
    from chaos.checkpoint.verify import UnusableInput, verify

    verify_fn = verify_fn or verify
    path = Path(str(request["path"]))
    fields = dict(request)
    try:
        report = verify_fn(path, load=False)
    except UnusableInput as exc:
        gone = not os.path.lexists(path)
        fields.update(ok=None if gone else False, gone=gone, problems=[str(exc)])
    except Exception as exc:  # a verifier bug is no verdict on the checkpoint: say it, judge nothing from it
        fields.update(ok=None, gone=False, problems=[f"verifier crashed: {type(exc).__name__}: {exc}"])
    else:
        if not report.ok and not os.path.lexists(path):
            # Retention renamed it away while it was being read (the workload's prune is an atomic
            # rename): what failed to read was a checkpoint leaving, not a broken one. Judged as gone.
            fields.update(ok=None, gone=True, format=report.kind,
                          problems=["removed while being verified: " + "; ".join(report.all_problems()[:2])])
        else:
            fields.update(ok=report.ok, gone=False, format=report.kind, problems=report.all_problems()[:5])
    return fields


class CheckpointWitness:
    """Sends every committed or loaded checkpoint path (once per event, path and attempt) to the child."""

    def __init__(self, log: Callable[..., Any]) -> None:
        self._log = log
        self._seen: set[tuple[str, str, str]] = set()
        self._child: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._sent = 0
        self._answered = 0

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
            self._send({"path": str(path), "step": rec.get("step"), "seen": ev, "attempt": rec.get("attempt"),
                        "t_event": rec.get("t")})

    def start(self) -> None:
        """Start the child now, while the workload starts up: started on the first commit instead, its own
        start-up (~1-3 s on a loaded 2-core box) let retention prune the first checkpoints before their look."""
        if self._child is None:
            # Its own session: a Ctrl-C meant for the harness must not cut a look short; it ends
            # when its stdin does.
            self._child = subprocess.Popen([sys.executable, "-m", "chaos.witness"], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                           start_new_session=True)
            self._reader = threading.Thread(target=self._read, args=(self._child.stdout,),
                                            name="chaos-witness", daemon=True)
            self._reader.start()

    def _send(self, request: dict[str, Any]) -> None:
        self.start()
        assert self._child is not None and self._child.stdin is not None
        try:
            self._child.stdin.write(json.dumps(request) + "\n")
            self._child.stdin.flush()
            self._sent += 1
        except OSError as exc:  # the child died: the check will see this look as missing
            self._log("ckpt_verify", **request, ok=None, gone=False, problems=[f"witness unavailable: {exc}"])

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                fields = json.loads(line)
            except json.JSONDecodeError:
                continue
            self._answered += 1
            self._log("ckpt_verify", **fields)

    def close(self) -> None:
        """Wait for every look under way (their records belong to this run's history), then stop the child."""
        if self._child is None:
            return
        try:
            if self._child.stdin is not None:
                self._child.stdin.close()
        except OSError:
            pass
        try:
            self._child.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        if self._reader is not None:
            self._reader.join(timeout=10)
        if self._answered < self._sent:
            self._log("witness_incomplete", sent=self._sent, answered=self._answered)


def _import_dcp() -> None:
    try:
        import torch.distributed.checkpoint  # noqa: F401
    except Exception:  # no torch here: the look says so when it needs it
        pass


def serve(stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
    """The child's loop: one JSON request a line in, one ``ckpt_verify`` field set a line out."""
    import chaos.checkpoint.verify  # noqa: F401  # before the first request, not during its look

    # A DCP directory's .metadata needs torch.distributed.checkpoint, whose import takes seconds on
    # a loaded box: started now (the child starts with the workload), not at the first commit,
    # after which retention could prune that checkpoint before its look (seen: step 10 pruned
    # while the first look still imported torch). A request that needs it waits on the import lock.
    threading.Thread(target=_import_dcp, name="chaos-witness-import", daemon=True).start()
    for line in stdin:
        try:
            request = json.loads(line)
        except json.JSONDecodeError:
            continue
        stdout.write(json.dumps(look(request), default=str) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
