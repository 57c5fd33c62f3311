"""The workload side of the event protocol: append one JSON line per event, flushed per line.

Dependency-light on purpose (stdlib only): users import this from their own training scripts.
A process without ``CHAOS_EVENTS_DIR`` in its environment writes nothing and pays nothing. A
torchrun worker launched by the harness writes one ``hello`` as it imports this module, before its
process group exists, so a first attempt that hangs in init can be named (``join_timeout_s``).

    from chaos import sdk
    sdk.start(dataset_size=len(ds), device="cpu")
    sdk.step(step, epoch=epoch, samples=indices, loss=loss.item())
    sdk.final(step, digest=sdk.digest_state(model, optim))  # or their state_dict()s
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import sys
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
            elif ev == "start":
                # A process that starts training again in place (NVRx's in-process restart) may have been given
                # another rank and world size (the ranks left after one was ended): each start says which.
                self._ident.update(rank=_env_int("RANK", 0), world_size=_env_int("WORLD_SIZE", 1))  # type: ignore[union-attr]
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
    extra.pop("rdzv_store", None)  # the SDK's own field: read by the harness, never a caller's value
    if os.environ.get("MASTER_PORT") and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "False":
        # The round's own store (without the agent's shared store, torchrun picks a new port for every
        # rendezvous): where the harness sees no process of the job, the ranks that wrote one round are one
        # attempt (chaos.evidence.events). With the shared store every round has the same address: none written.
        extra["rdzv_store"] = f"{os.environ.get('MASTER_ADDR', '')}:{os.environ['MASTER_PORT']}"
    emit("start", local_rank=local_rank, device=device, **extra)


def step(step: int, *, epoch: int, samples: Iterable[int], loss: float, **extra: Any) -> None:
    """Optimizer step ``step`` (1-based) completed on this rank, having consumed ``samples``.

    Where the harness holds this step (an ``at_step`` fault armed for it), the rank waits here, its
    step reported, until the fault has acted: the fault lands at the step it asked for, not at
    whatever step the ranks reached by the time the harness saw this one."""
    # A list (of ints, or of numpy/torch scalars that _jsonable turns into ints) is written as is.
    samples = samples if type(samples) is list else [int(s) for s in samples]
    emit("step", step=step, epoch=epoch, samples=samples, loss=float(loss), **extra)
    _last_step[0] = step
    holds = _holds_dir()
    # Only a step the harness was told of is held: a process writing no events would wait for nothing.
    if holds is not None and writer().enabled:
        _hold(os.path.join(holds, f"step-{step}"))
    for callback in _after_step:
        callback(step)


_last_step: list[int | None] = [None]
_after_step: list[Any] = []


def last_step() -> int | None:
    """The last step this process reported with ``step`` (None before the first)."""
    return _last_step[0]


def after_step(callback: Any) -> None:
    """Call ``callback(step)`` after each reported step, once the harness has released it where it held it
    (chaos.instep picks up a fault armed during the hold here, so it acts in the very next step)."""
    _after_step.append(callback)


def forget_after_step(callback: Any) -> None:
    if callback in _after_step:
        _after_step.remove(callback)


HOLDS_DIR = "holds"
"""Below CHAOS_RUN_DIR: ``step-N`` files the harness writes for each armed ``at_step N`` fault and removes once
the fault has acted (chaos.run.runner). None there: nothing is held, and a step costs no system call for it."""
HOLD_MAX_S = 30.0
"""The longest a rank waits at a held step: a harness that died holding it must not hang the job."""
_holds: list[str | None] = []


def _holds_dir() -> str | None:
    if not _holds:  # once per process: the harness makes the folder before it launches the ranks
        run_dir = os.environ.get(RUN_DIR_ENV)
        path = os.path.join(run_dir, HOLDS_DIR) if run_dir else None
        _holds.append(path if path and os.path.isdir(path) else None)
    return _holds[0]


def _hold(path: str) -> None:
    deadline = time.monotonic() + HOLD_MAX_S
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.005)


def ckpt_begin(step: int, path: str, reason: str | None = None) -> None:
    """A save started; ``reason`` says why when it is not the periodic one (e.g. "health": a degrading GPU asked)."""
    extra = {"reason": reason} if reason else {}
    emit("ckpt_begin", step=step, path=str(path), **extra)


def ckpt_staged(step: int, *, seconds: float, bytes: int | None = None) -> None:
    """An asynchronous save of ``step`` was staged: its state copied aside (host memory) in ``seconds``, the time
    training was blocked by it. Training resumes now while a background writer persists the copy; its
    ``ckpt_begin`` and ``ckpt_commit`` follow (or a ``ckpt_error``), and until the commit the copy is not durable."""
    emit("ckpt_staged", step=step, seconds=float(seconds), **({"bytes": int(bytes)} if bytes is not None else {}))


def ckpt_durable(step: int, path: str) -> None:
    """Every file of the save of ``step`` is written and fsynced (at ``path``, where it is being written), and it is
    not committed yet: nothing a resume selects names it until its ``ckpt_commit``. The phase a kill must strike to
    prove that data on disk without a commit record is never trusted."""
    emit("ckpt_durable", step=step, path=str(path))


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


DIGEST_VERSION = 2
"""The digest scheme: a golden run cached under another scheme is not compared with this one's
digests (chaos.run.golden reruns it). 2: bytes of every value with a type tag; objects refused, not repr()'d."""


def digest_state(*states: Any) -> str:
    """A stable digest of model and optimizer state, for the ``final`` event.

    Bit-exact: two runs that end in the same model and optimizer state get the same digest, and two
    that differ in any value get different ones. Accepted, nested as deep as needed: torch tensors
    (their bytes, dtype and shape), numpy arrays, ``torch.nn.Module``, ``torch.optim.Optimizer`` and
    anything else with a ``state_dict()`` (digested as its state dict, so ``digest_state(model, opt)``
    equals ``digest_state(model.state_dict(), opt.state_dict())``), dicts (in a fixed key order),
    lists and tuples, and plain ``None``/bool/int/float/complex/str/bytes values. Anything else is
    a ``TypeError``: hashing an object's ``repr()`` would give the same digest for different weights.
    """
    h = hashlib.sha256()
    for i, state in enumerate(states):
        try:
            _feed(h.update, state)
        except _Unhashable as exc:
            raise TypeError(exc.message(f"argument {i}")) from None
    return h.hexdigest()


def _feed(out: Any, obj: Any) -> None:
    """Write ``obj``'s bytes to ``out``: each value type-tagged and length-framed, so no two values
    of different types or contents write the same bytes."""
    if obj is None:
        out(b"N")
    elif obj is True or obj is False:
        out(b"B1" if obj else b"B0")
    elif isinstance(obj, int):
        out(b"I%d;" % int(obj))
    elif isinstance(obj, float):
        out(b"F" + struct.pack(">d", obj))  # the exact bits: -0.0 and 0.0, every NaN payload, differ
    elif isinstance(obj, complex):
        out(b"C" + struct.pack(">dd", obj.real, obj.imag))
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        out(b"S%d:" % len(data) + data)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        out(b"Y%d:" % len(data) + data)
    elif isinstance(obj, dict):
        # Keys in the order of their own encoding: deterministic for any mix of key types, and
        # {1: x} and {"1": x} differ.
        items = sorted(((_encode(key), value) for key, value in obj.items()), key=lambda kv: kv[0])
        out(b"{%d:" % len(items))
        for key, value in items:
            out(key)
            try:
                _feed(out, value)
            except _Unhashable as exc:
                exc.path.insert(0, _show_key(key))
                raise
        out(b"}")
    elif isinstance(obj, (list, tuple)):
        # A list and a tuple of the same values digest alike: a checkpoint format that turns Adam's
        # betas tuple into a list must not make a correct resume differ from its golden run.
        out(b"[%d:" % len(obj))
        for i, item in enumerate(obj):
            try:
                _feed(out, item)
            except _Unhashable as exc:
                exc.path.insert(0, f"[{i}]")
                raise
        out(b"]")
    elif _is_tensor(obj):
        _feed_tensor(out, obj)
    elif _is_numpy(obj):
        _feed_array(out, obj)
    elif _is_torch_value(obj):  # torch.dtype, torch.device: by their name
        out(b"P" + _encode(str(obj)))
    elif callable(getattr(obj, "state_dict", None)):  # nn.Module, Optimizer, LR scheduler, ...
        state = obj.state_dict()
        if state is obj or not isinstance(state, dict):
            raise _Unhashable(obj, f"its state_dict() returned a {type(state).__name__}, not a dict")
        _feed(out, state)
    else:
        raise _Unhashable(obj)


def _encode(obj: Any) -> bytes:
    parts: list[bytes] = []
    _feed(parts.append, obj)
    return b"".join(parts)


class _Unhashable(TypeError):
    """A value ``_feed`` cannot digest, and where it sits in the state (filled in on the way out)."""

    def __init__(self, obj: Any, why: str = "") -> None:
        super().__init__(why)
        self.kind = type(obj)
        self.why = why
        self.path: list[str] = []

    def message(self, argument: str) -> str:
        kind = self.kind
        name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        where = f"{argument}{''.join(self.path)}"
        why = f" ({self.why})" if self.why else ""
        return (f"digest_state cannot hash a value of type {name} (at {where}){why}: its repr() does not show its "
                f"values, so different states would get the same digest. Pass the model and optimizer objects, "
                f"their state_dict(), or the tensors, numpy arrays and plain values (None, bool, int, float, str, "
                f"bytes, in dicts, lists and tuples) that hold the state")


def _show_key(encoded: bytes) -> str:
    if encoded[:1] == b"S":
        return f"[{encoded.split(b':', 1)[1].decode('utf-8', 'replace')!r}]"
    if encoded[:1] == b"I":
        return f"[{encoded[1:-1].decode()}]"
    return "[...]"


def _is_tensor(obj: Any) -> bool:
    # torch is never imported here: an object can only be a tensor if torch already is.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, getattr(torch, "Tensor", ()))


def _is_numpy(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, (getattr(np, "ndarray", ()), getattr(np, "generic", ())))


def _is_torch_value(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, (getattr(torch, "dtype", ()), getattr(torch, "device", ())))


def _feed_tensor(out: Any, tensor: Any) -> None:
    import torch  # already imported: a tensor is in hand

    tensor = tensor.detach()
    if hasattr(tensor, "full_tensor"):  # a DTensor: digest the logical tensor
        tensor = tensor.full_tensor()
    if tensor.layout != torch.strided:  # sparse: its dense values
        tensor = tensor.to_dense()
    tensor = tensor.cpu().resolve_conj().resolve_neg().contiguous()
    out(b"T" + _encode(str(tensor.dtype)) + _encode(tuple(tensor.shape)))
    data = tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    out(b"%d:" % len(data) + data)


def _feed_array(out: Any, array: Any) -> None:
    import numpy as np  # already imported: an array is in hand

    array = np.asarray(array)
    out(b"A" + _encode(array.dtype.str) + _encode(tuple(int(n) for n in array.shape)))
    if array.dtype.hasobject:  # pointers, not values: digest each element
        out(b"O")
        for item in array.reshape(-1).tolist():
            _feed(out, item)
        return
    if array.dtype.fields is not None or array.dtype.kind == "V":
        out(_encode(str(array.dtype.descr)))
    data = np.ascontiguousarray(array).tobytes()
    out(b"%d:" % len(data) + data)


# A torchrun worker (RANK set) launched by the harness says hello the moment it imports the SDK,
# before its process group exists. Only workers: a helper process of the harness's that inherits
# the environment (a Slurm step lister, a health sidecar without RANK) must not claim to be a rank.
if os.environ.get(EVENTS_DIR_ENV) and "RANK" in os.environ:
    hello()
