"""The workload side of the event protocol: append one JSON line per event, flushed per line.

Dependency-light on purpose (stdlib only): users import this from their own training scripts.
A process without ``CHAOS_EVENTS_DIR`` in its environment writes nothing and pays nothing. A
torchrun worker launched by the harness writes one ``hello`` as it imports this module, before its
process group exists, so a first attempt that hangs in init can be named (``join_timeout_s``).

    from chaos import sdk
    sdk.start(dataset_size=len(ds), device="cpu")
    sdk.step(step, epoch=epoch, samples=indices, loss=loss.item())
    sdk.final(step, digest=sdk.digest_state(model.state_dict(), optim.state_dict()))
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from typing import Any, Iterable

try:  # optional: orjson serialises a step record several times faster than json
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

EVENTS_DIR_ENV = "CHAOS_EVENTS_DIR"
RUN_DIR_ENV = "CHAOS_RUN_DIR"
LAUNCH_ENV = "CHAOS_LAUNCH"
HOST_ENV = "CHAOS_HOST"


class EventWriter:
    """Writes protocol records for one process to ``<events_dir>/<host>-<pid>.jsonl``."""

    def __init__(self, events_dir: str | None, host: str | None = None) -> None:
        self.events_dir = events_dir
        self.host = host or os.environ.get(HOST_ENV) or socket.gethostname()
        self._fd: int | None = None
        self._pid: int | None = None
        self._ident: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.events_dir)

    def _reopen(self, pid: int) -> None:
        # After a fork the child gets its own file (a child must never append to its parent's) and
        # its own identity; torchrun fixes RANK and the rest for a worker's lifetime, so they are
        # read from the environment once per process, not per event.
        os.makedirs(self.events_dir, exist_ok=True)  # type: ignore[arg-type]
        path = os.path.join(self.events_dir, f"{self.host}-{pid}.jsonl")  # type: ignore[arg-type]
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._ident = {"pid": pid, "host": self.host, "rank": _env_int("RANK", 0),
                       "world_size": _env_int("WORLD_SIZE", 1), "attempt": attempt_id()}
        self._pid = pid

    def emit(self, ev: str, **fields: Any) -> None:
        """Append one record; a SIGKILL right after this call loses nothing already written."""
        if not self.enabled:
            return
        pid = os.getpid()  # a real system call: once per event
        with self._lock:
            if pid != self._pid:
                self._reopen(pid)
            line = _dumps({"ev": ev, "t": time.time(), "mono": time.monotonic(), **self._ident, **fields})
            # One unbuffered write() of one whole line: nothing waits in a user-space buffer for a
            # SIGKILL to lose, and O_APPEND keeps concurrent writers' lines intact.
            os.write(self._fd, line)  # type: ignore[arg-type]


def _dumps(record: dict[str, Any]) -> bytes:
    if _orjson is not None:
        try:
            return _orjson.dumps(record, default=_jsonable, option=_orjson.OPT_APPEND_NEWLINE)
        except TypeError:
            pass  # e.g. an int beyond 64 bits: the stdlib handles it
    return (json.dumps(record, separators=(",", ":"), default=_jsonable) + "\n").encode()


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and torch tensors
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def attempt_id() -> str:
    """``"<harness launch>.<torchelastic restart count>"``, unique per launch and restart."""
    return f"{os.environ.get(LAUNCH_ENV, '0')}.{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


_writer: EventWriter | None = None


def writer() -> EventWriter:
    """The process-wide writer, configured from the environment on first use."""
    global _writer
    if _writer is None:
        _writer = EventWriter(os.environ.get(EVENTS_DIR_ENV))
    return _writer


def enabled() -> bool:
    return writer().enabled


def emit(ev: str, **fields: Any) -> None:
    writer().emit(ev, **fields)


def hello() -> None:
    """This process speaks the protocol and has not joined the process group yet (sent at import, below).

    It lets the harness judge a *first* attempt whose ranks never reach ``start`` (a rendezvous or
    init that hangs) after ``join_timeout_s`` instead of only at ``timeout_s``: without it, silence
    before the first ``start`` cannot tell a hung init from a script that never speaks the protocol.
    """
    emit("hello")


def start(*, dataset_size: int | None, device: str, local_rank: int | None = None, **extra: Any) -> None:
    """The process is up and has joined the process group; ``dataset_size`` None: unknown (an iterable dataset)."""
    if local_rank is None:
        local_rank = _env_int("LOCAL_RANK", 0)
    if dataset_size is not None:
        extra["dataset_size"] = int(dataset_size)
    emit("start", local_rank=local_rank, device=device, **extra)


def step(step: int, *, epoch: int, samples: Iterable[int], loss: float, **extra: Any) -> None:
    """Optimizer step ``step`` (1-based) completed on this rank, having consumed ``samples``."""
    # A list (of ints, or of numpy/torch scalars that _jsonable turns into ints) is written as is.
    samples = samples if type(samples) is list else [int(s) for s in samples]
    emit("step", step=step, epoch=epoch, samples=samples, loss=float(loss), **extra)


def ckpt_begin(step: int, path: str, reason: str | None = None) -> None:
    """A save started; ``reason`` says why when it is not the periodic one (e.g. "health": a degrading GPU asked)."""
    extra = {"reason": reason} if reason else {}
    emit("ckpt_begin", step=step, path=str(path), **extra)


def ckpt_commit(step: int, path: str, *, bytes: int, seconds: float) -> None:
    emit("ckpt_commit", step=step, path=str(path), bytes=int(bytes), seconds=float(seconds))


def ckpt_error(step: int, path: str, error: str) -> None:
    emit("ckpt_error", step=step, path=str(path), error=str(error))


def ckpt_load(step: int, path: str | None) -> None:
    """Training resumed from this checkpoint; ``step`` 0 and ``path`` None mean a fresh start."""
    emit("ckpt_load", step=step, path=str(path) if path else None)


def ckpt_reject(path: str, reason: str) -> None:
    emit("ckpt_reject", path=str(path), reason=reason)


def health(*, source: str, code: int | str, device: str | int, action: str, **extra: Any) -> None:
    emit("health", source=source, code=code, device=device, action=action, **extra)


def final(step: int, digest: str, **extra: Any) -> None:
    emit("final", step=step, digest=digest, **extra)


def digest_state(*states: Any) -> str:
    """A stable digest of nested state dicts (tensors by their bytes), for the ``final`` event.

    Bit-exact: two runs that end in the same model and optimizer state get the same digest.
    """
    h = hashlib.sha256()
    for state in states:
        _feed(h, state)
    return h.hexdigest()


def _feed(h: "hashlib._Hash", obj: Any) -> None:
    if isinstance(obj, dict):
        h.update(b"{")
        for key in sorted(obj, key=str):
            h.update(str(key).encode())
            h.update(b":")
            _feed(h, obj[key])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for item in obj:
            _feed(h, item)
        h.update(b"]")
    elif hasattr(obj, "detach") and hasattr(obj, "dtype"):  # a torch tensor, without importing torch
        tensor = obj.detach()
        if hasattr(tensor, "full_tensor"):  # a DTensor: digest the logical tensor
            tensor = tensor.full_tensor()
        tensor = tensor.cpu().contiguous()
        h.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
        h.update(tensor.view(-1).view(torch_uint8(tensor)).numpy().tobytes() if tensor.numel() else b"")
    else:
        h.update(repr(obj).encode())


def torch_uint8(tensor: Any) -> Any:
    import torch  # only reached with a tensor in hand, so torch is already imported

    return torch.uint8


# A torchrun worker (RANK set) launched by the harness says hello the moment it imports the SDK,
# before its process group exists. Only workers: a helper process of the harness's that inherits
# the environment (a Slurm step lister, a health sidecar without RANK) must not claim to be a rank.
if os.environ.get(EVENTS_DIR_ENV) and "RANK" in os.environ:
    hello()
