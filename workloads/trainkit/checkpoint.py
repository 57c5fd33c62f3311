"""Atomic, verifiable, retried checkpoints: the commit protocol shared by the DDP and FSDP workloads.

Layout (``<ckpt_dir>``)::

    step_000020/            a committed checkpoint (MANIFEST.json + the format's data files)
    step_000030/
    latest                  names the newest committed step directory ("step_000030")
    .tmp-step_000040-<nonce>/   a save in progress (or abandoned: deleted on the next start)

Commit protocol for step ``s`` (every rank takes part; rank 0 does the filesystem commit):
nonce agreed by broadcast -> every rank writes its files into ``.tmp-step_<s>-<nonce>/`` and
fsyncs them -> all ranks agree the writes succeeded (all_gather of errors, which is also the
barrier) -> rank 0 reports the data durable (``ckpt_durable``) -> rank 0 fsyncs every file, writes MANIFEST.json, moves a stale ``step_<s>`` aside,
renames the temporary directory to ``step_<s>``, fsyncs ``<ckpt_dir>``, replaces ``latest``
atomically -> rank 0 broadcasts the outcome. A failed attempt removes its temporary directory and
is retried with backoff (tenacity); when every attempt failed the save is abandoned with a
``ckpt_error`` event and training continues on the previous checkpoint. Events: rank 0 emits
``ckpt_begin``/``ckpt_durable``/``ckpt_commit``/``ckpt_reject``; every rank emits ``ckpt_load`` and ``ckpt_error``.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from chaos import sdk
from chaos.checkpoint.manifest import (
    LATEST_NAME,
    build_manifest,
    fsync_path,
    read_manifest,
    verify_manifest,
    write_atomic,
    write_manifest,
)
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from .dist import Comm


def recoverable() -> tuple[type[BaseException], ...]:
    """What a save or load may raise and the job survive.

    torch.distributed.checkpoint wraps every rank's error (ENOSPC mid dcp.save, a torn shard on load)
    in CheckpointException, which derives from BaseException: `except Exception` lets it crash the
    job. It is looked up, not imported: a DDP rank (torch.save format) never needs DCP, and nothing
    raises it before the DCP format has imported it. The import costs 0.9 s of CPU at start-up, but
    DDP's own __init__ imports most of the same modules (torch._dynamo, DTensor, sympy), so a DDP
    rank saves about 0.3 s of its ~3 s start."""
    api = sys.modules.get("torch.distributed.checkpoint.api")
    return (Exception, api.CheckpointException) if api is not None else (Exception,)

log = logging.getLogger(__name__)

STEP_DIR = re.compile(r"^step_(\d+)$")
TMP_PREFIX = ".tmp-"


def step_dir_name(step: int) -> str:
    return f"step_{step:06d}"


class SaveFailed(Exception):
    """One save attempt failed on at least one rank (every rank raises it, together)."""


class CheckpointFormat(Protocol):
    """How one kind of training state is written into, and read back from, a step directory."""

    name: str
    """Recorded in the manifest's meta; a checkpoint of another format is rejected on load."""

    def stage(self, app: Any, step: int, *, copy: bool) -> Any:
        """Capture what to save (``copy``: into private CPU memory, for a background write)."""

    def write_collective(self, staged: Any, directory: Path, comm: Comm) -> None:
        """The part every rank calls together (e.g. ``dcp.save``); raises on all ranks or none."""

    def write_local(self, staged: Any, directory: Path, rank: int) -> None:
        """This rank's own files, each fsynced."""

    def load(self, directory: Path, app: Any, comm: Comm) -> int:
        """Restore ``app`` from ``directory``; returns the step it was taken at."""


@dataclass
class SaveResult:
    step: int
    path: Path
    ok: bool
    bytes: int = 0
    seconds: float = 0.0
    error: str = ""


def list_step_dirs(ckpt_dir: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every ``step_*`` directory, newest first."""
    if not ckpt_dir.is_dir():
        return []
    found = []
    for entry in ckpt_dir.iterdir():
        match = STEP_DIR.match(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found, reverse=True)


def remove_leftovers(ckpt_dir: Path) -> list[Path]:
    """Delete temporary directories and pointer temp files of abandoned saves."""
    removed = []
    if not ckpt_dir.is_dir():
        return removed
    for entry in ckpt_dir.iterdir():
        if entry.name.startswith(TMP_PREFIX) or entry.name.startswith(f".{LATEST_NAME}.tmp-"):
            remove_path(entry)
            removed.append(entry)
    return removed


def remove_path(path: Path) -> None:
    """Best-effort delete (a read-only or full filesystem must not stop training)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove %s: %s", path, exc)



def commit_dir(tmp: Path, final: Path, step: int, **meta: Any) -> int:
    """Seal ``tmp`` with a manifest, rename it to ``final``, move ``latest``; returns the bytes committed."""
    for root, _dirs, files in os.walk(tmp):
        for name in files:
            fsync_path(Path(root) / name)
    manifest = build_manifest(tmp, step, **meta)
    write_manifest(tmp, manifest)
    parent = final.parent
    if final.exists():
        # A stale step directory from an abandoned timeline: replace it whole, never merge into it.
        aside = parent / f"{TMP_PREFIX}stale-{final.name}-{secrets.token_hex(4)}"
        os.replace(final, aside)
        shutil.rmtree(aside, ignore_errors=True)
    os.replace(tmp, final)
    fsync_path(parent)
    write_atomic(parent / LATEST_NAME, final.name.encode())
    return sum(info["size"] for info in manifest["files"].values())


def prune(ckpt_dir: Path, keep: int, current_step: int) -> list[Path]:
    """Delete committed checkpoints older than the newest ``keep`` (never one newer than ``current_step``)."""
    committed = [(s, p) for s, p in list_step_dirs(ckpt_dir) if s <= current_step]
    doomed = [p for _s, p in committed[max(keep, 1):]]
    for path in doomed:
        aside = ckpt_dir / f"{TMP_PREFIX}prune-{path.name}-{secrets.token_hex(4)}"
        # Rename first so a kill mid-delete never leaves a half-deleted step directory behind.
        os.replace(path, aside)
        shutil.rmtree(aside, ignore_errors=True)
    return doomed


def _describe(exc: BaseException, rank: int) -> str:
    return f"rank {rank}: {type(exc).__name__}: {exc}"


class CheckpointManager:
    """Saves and resumes training state in ``ckpt_dir`` with the protocol in the module docstring."""

    def __init__(
        self,
        ckpt_dir: str | os.PathLike[str],
        fmt: CheckpointFormat,
        comm: Comm,
        *,
        keep: int = 3,
        retries: int = 3,
        retry_wait_s: float = 0.2,
        async_comm: Comm | None = None,
        meta: dict[str, Any] | None = None,
        events: Any = sdk,
        sleep: Callable[[float], None] = time.sleep,
        write_delay_s: float = 0.0,
        read_delay_s: float = 0.0,
        commit_delay_s: float = 0.0,
        start_delay_s: float = 0.0,
    ) -> None:
        self.ckpt_dir = Path(ckpt_dir).absolute()
        self.fmt = fmt
        self.comm = comm
        self.keep = keep
        self.retries = max(1, retries)
        self.retry_wait_s = retry_wait_s
        self.async_comm = async_comm
        self.meta = {"world_size": comm.world_size, "format": fmt.name, **(meta or {})}
        self.events = events
        self.sleep = sleep
        self.write_delay_s = write_delay_s
        self.read_delay_s = read_delay_s
        self.commit_delay_s = commit_delay_s
        self.start_delay_s = start_delay_s
        self.results: list[SaveResult] = []
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None

    @property
    def is_async(self) -> bool:
        return self.async_comm is not None

    # ---- resume -------------------------------------------------------------------------------

    def resume(self, app: Any) -> tuple[int, Path | None]:
        """Load the newest valid checkpoint (all ranks agree on which); ``(0, None)`` for a fresh start."""
        rank0 = self.comm.rank == 0
        candidates: list[str] = []
        if rank0:
            try:
                self.ckpt_dir.mkdir(parents=True, exist_ok=True)
                remove_leftovers(self.ckpt_dir)
                candidates = [str(p) for _s, p in list_step_dirs(self.ckpt_dir)]
            except OSError as exc:  # e.g. a read-only mount: still resume from what can be read
                log.warning("checkpoint directory %s: %s", self.ckpt_dir, exc)
                candidates = [str(p) for _s, p in list_step_dirs(self.ckpt_dir)] if self.ckpt_dir.is_dir() else []
        candidates = self.comm.broadcast(candidates)
        failed_load = False
        for candidate in candidates:
            path = Path(candidate)
            reason = self.comm.broadcast(self._check(path) if rank0 else None)
            if reason:
                if rank0:
                    self.events.ckpt_reject(str(path), reason)
                continue
            error = None
            step = 0
            try:
                if self.read_delay_s:
                    self.sleep(self.read_delay_s)  # slow storage on restore
                step = self.fmt.load(path, app, self.comm)
            except recoverable() as exc:  # any rank's failure rejects the candidate on all ranks
                error = _describe(exc, self.comm.rank)
            errors = [e for e in self.comm.all_gather(error) if e]
            if errors:
                failed_load = True
                if rank0:
                    self.events.ckpt_reject(str(path), "load failed: " + "; ".join(errors))
                continue
            self.events.ckpt_load(step, str(path))
            return step, path
        if failed_load:
            raise RuntimeError(
                f"no checkpoint in {self.ckpt_dir} could be loaded, and a failed load may have left the "
                "state partly restored; refusing to train from it (see the ckpt_reject events)"
            )
        self.events.ckpt_load(0, None)
        return 0, None

    def _check(self, path: Path) -> str:
        problems = verify_manifest(path)
        if problems:
            return "; ".join(problems)
        manifest = read_manifest(path)
        fmt = manifest.get("meta", {}).get("format")
        if fmt != self.fmt.name:
            return f"format {fmt!r}, this workload reads {self.fmt.name!r}"
        if manifest.get("step") != int(STEP_DIR.match(path.name).group(1)):  # type: ignore[union-attr]
            return f"manifest step {manifest.get('step')} does not match the directory name"
        return ""

    # ---- save ---------------------------------------------------------------------------------

    def save(self, step: int, app: Any, reason: str | None = None) -> SaveResult | None:
        """Save ``app`` at ``step``: blocking, or staged and written in the background when async.

        ``reason`` (e.g. "health") goes into ``ckpt_begin`` for a save off the periodic schedule."""
        self.wait()
        t0 = time.monotonic()
        staged = self.fmt.stage(app, step, copy=self.is_async)
        if not self.is_async:
            return self._save_staged(step, staged, self.comm, reason)
        # The staging is all the training loop waits for; from here the copy is only in memory until its commit.
        self.events.ckpt_staged(step, seconds=time.monotonic() - t0)
        self._thread = threading.Thread(
            target=self._run_background, args=(step, staged, reason), name=f"ckpt-save-{step}", daemon=True
        )
        self._thread.start()
        return None

    def _run_background(self, step: int, staged: Any, reason: str | None = None) -> None:
        try:
            if self.start_delay_s:
                time.sleep(self.start_delay_s)  # the writer not yet begun: the state only as the staged copy
            self._save_staged(step, staged, self.async_comm, reason)  # type: ignore[arg-type]
        except BaseException as exc:  # surfaced by wait() on the training thread
            self._thread_error = exc

    def wait(self) -> None:
        """Block until the pending background save (if any) is committed or abandoned."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._thread_error is not None:
            error, self._thread_error = self._thread_error, None
            raise RuntimeError("background checkpoint save crashed") from error

    def _save_staged(self, step: int, staged: Any, comm: Comm, reason: str | None = None) -> SaveResult:
        final = self.ckpt_dir / step_dir_name(step)
        rank0 = comm.rank == 0
        if rank0:
            self.events.ckpt_begin(step, str(final), **({"reason": reason} if reason else {}))
        started = time.monotonic()
        retrying = Retrying(
            stop=stop_after_attempt(self.retries),
            wait=wait_exponential(multiplier=self.retry_wait_s, max=2.0),
            retry=retry_if_exception_type(SaveFailed),
            sleep=self.sleep,
            reraise=True,
            before_sleep=lambda rs: log.warning("checkpoint step %d attempt %d failed: %s", step,
                                                rs.attempt_number, rs.outcome.exception()),
        )
        try:
            nbytes = retrying(self._attempt, step, staged, comm, final)
        except SaveFailed as exc:
            result = SaveResult(step, final, ok=False, seconds=time.monotonic() - started, error=str(exc))
            # Every rank says it gave the save up (the agreement above made it fail on all): the proof that the
            # ranks agreed, which a rank merely training on would not be (save_fails_together).
            self.events.ckpt_error(step, str(final), result.error)
            log.error("checkpoint step %d abandoned after %d attempts: %s", step, self.retries, exc)
            self.results.append(result)
            return result
        result = SaveResult(step, final, ok=True, bytes=nbytes, seconds=time.monotonic() - started)
        if rank0:
            self.events.ckpt_commit(step, str(final), bytes=nbytes, seconds=result.seconds)
            try:
                prune(self.ckpt_dir, self.keep, step)
            except OSError as exc:  # retention is housekeeping: never fail training over it
                log.warning("pruning old checkpoints failed: %s", exc)
        self.results.append(result)
        return result

    def _attempt(self, step: int, staged: Any, comm: Comm, final: Path) -> int:
        rank0 = comm.rank == 0
        nonce = comm.broadcast(secrets.token_hex(4) if rank0 else None)
        tmp = self.ckpt_dir / f"{TMP_PREFIX}{final.name}-{nonce}"
        error = None
        try:
            tmp.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            error = _describe(exc, comm.rank)
        self._agree(comm, error, tmp)
        try:
            self.fmt.write_collective(staged, tmp, comm)
            self.fmt.write_local(staged, tmp, comm.rank)
            if self.write_delay_s:
                time.sleep(self.write_delay_s)  # not self.sleep: that one is the retry backoff tests fake
        except recoverable() as exc:  # a local failure must still reach the agreement below
            error = _describe(exc, comm.rank)
        self._agree(comm, error, tmp)
        outcome: tuple[str | None, int] = (None, 0)
        if rank0:
            # Every rank's files are on disk and fsynced (the agreement above is also the barrier); nothing
            # names them yet. A crash from here to the commit must lose this save, never select it.
            self.events.ckpt_durable(step, str(tmp))
            if self.commit_delay_s:
                time.sleep(self.commit_delay_s)
            try:
                outcome = (None, commit_dir(tmp, final, step, **self.meta))
            except OSError as exc:
                outcome = (_describe(exc, comm.rank), 0)
                remove_path(tmp)
        error, nbytes = comm.broadcast(outcome)
        if error:
            raise SaveFailed(error)
        return nbytes

    def _agree(self, comm: Comm, error: str | None, tmp: Path) -> None:
        errors = [e for e in comm.all_gather(error) if e]
        if errors:
            if comm.rank == 0:
                remove_path(tmp)
            raise SaveFailed("; ".join(errors))

    def close(self) -> None:
        self.wait()
