"""Corrupt a committed checkpoint in the run's checkpoint directory (bitflip, truncate, delete or swap a shard, break 'latest')."""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path
from typing import Any, Literal

import xxhash
from pydantic import Field

from chaos.checkpoint.manifest import LATEST_NAME, MANIFEST_NAME, hash_file
from chaos.checkpoint.verify import DCP_METADATA, STEP_ENTRY, claims_committed, resolve_latest, step_of
from chaos.runtime.context import RunContext
from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.undo import RestoreIfUnchanged

Mode = Literal["bitflip", "truncate", "delete-shard", "delete-metadata", "stale-shard", "break-latest"]
BROKEN_LATEST = "step_999999999"
"""What break-latest points ``latest`` at: a step directory that does not exist."""
_CHUNK = 8 << 20


class CorruptCheckpointConfig(FaultConfig):
    mode: Mode
    """bitflip (one bit in a data file) | truncate (a data file to half) | delete-shard | delete-metadata (.metadata, else MANIFEST.json) | stale-shard (the same file from an older step) | break-latest (point 'latest' at a missing step)."""
    target: Literal["latest", "random"] | int = "latest"
    """Which checkpoint: 'latest' (what the pointer names, else the newest step), 'random' (seeded), or a step number."""
    file: str | None = None
    """Glob of the file to damage inside a step directory (e.g. '*.distcp', 'state.pt'); default the largest data file."""
    truncate_to: float = Field(default=0.5, ge=0.0, lt=1.0)
    """truncate: keep this fraction of the file's bytes."""


class CorruptCheckpoint(Fault, kind="corrupt-checkpoint"):
    """Corrupt a committed checkpoint in the run's checkpoint directory (bitflip, truncate, delete or swap a shard, break 'latest').

    Only paths that resolve (symlinks followed) inside the run's checkpoint directory are touched.
    Every changed file is backed up first; revert puts the original back only while the file is
    still the corrupted version (a checkpoint the workload re-saved since is left alone).
    """

    Config = CorruptCheckpointConfig

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        return [f"{c.mode} on checkpoint {c.target!r} under {run.ckpt_dir} (file {c.file or 'largest data file'}); "
                f"backup under {run.run_dir}/backups, restored on revert if still corrupted"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        root = run.ckpt_dir.resolve()
        if c.mode == "break-latest":
            return self._break_latest(run, root)
        ckpt = self._pick(run, root)
        if c.mode == "stale-shard":
            victim = self._pick_file(ckpt, data_only=True, run=run)
            source = self._older_copy(root, ckpt, victim)
            left = hash_file(source)
            self._backup_then(run, victim, left, lambda: _replace_with_copy(source, victim))
            extra = {"source": str(source)}
        elif c.mode == "delete-metadata":
            victim = self._metadata_file(ckpt)
            self._backup_then(run, victim, "", victim.unlink)
            extra = {}
        elif c.mode == "delete-shard":
            victim = self._pick_file(ckpt, data_only=True, run=run)
            self._backup_then(run, victim, "", victim.unlink)
            extra = {}
        elif c.mode == "truncate":
            victim = self._pick_file(ckpt, data_only=True, run=run)
            size = victim.stat().st_size
            keep = int(size * c.truncate_to)
            self._backup_then(run, victim, _hash_prefix(victim, keep), lambda: os.truncate(victim, keep))
            extra = {"size_before": size, "size_after": keep}
        else:
            victim = self._pick_file(ckpt, data_only=True, run=run)
            size = victim.stat().st_size
            if size == 0:
                raise FaultError(f"{victim} is empty: nothing to flip")
            # The middle 80%: the bytes most likely to be tensor data, which only a checksum catches.
            offset = run.rng.randrange(size // 10, max(size // 10 + 1, size - size // 10))
            bit = run.rng.randrange(8)
            self._backup_then(run, victim, _hash_flipped(victim, offset, bit), lambda: _flip(victim, offset, bit))
            extra = {"offset": offset, "bit": bit}
        return {"mode": c.mode, "path": str(ckpt), "step": step_of(ckpt), "file": str(victim), **extra}

    # ---- choosing what to damage ------------------------------------------------------------

    def _pick(self, run: RunContext, root: Path) -> Path:
        committed = committed_entries(root)
        if not committed:
            raise FaultError(f"no committed checkpoint in {root} to corrupt yet; trigger later "
                             "(e.g. {on_event: ckpt_commit})")
        target = self.config.target
        if target == "latest":
            name, problem = resolve_latest(root) if (root / LATEST_NAME).exists() else (None, "")
            if name and not problem:
                chosen = _inside(root, root / name)
            else:
                chosen = committed[-1]
        elif target == "random":
            chosen = run.rng.choice(committed)
        else:
            matches = [p for p in committed if step_of(p) == target]
            if not matches:
                raise FaultError(f"no committed checkpoint of step {target} in {root}; "
                                 f"present: {[step_of(p) for p in committed]}")
            chosen = matches[0]
        return _inside(root, chosen)

    def _pick_file(self, ckpt: Path, *, data_only: bool, run: RunContext) -> Path:
        if ckpt.is_file():
            return ckpt
        files = [p for p in _files(ckpt) if not data_only or p.name not in (MANIFEST_NAME, DCP_METADATA)]
        if self.config.file:
            files = [p for p in files if fnmatch.fnmatch(str(p.relative_to(ckpt)), self.config.file)]
        if not files:
            raise FaultError(f"no file matching {self.config.file or 'a data file'} in {ckpt}")
        # The largest file is the shard that holds tensor data; ties broken by name for determinism.
        return _inside(ckpt, max(files, key=lambda p: (p.stat().st_size, p.name)))

    def _metadata_file(self, ckpt: Path) -> Path:
        if ckpt.is_file():
            raise FaultError(f"{ckpt} is a single-file checkpoint: it has no separate metadata to delete")
        for name in (DCP_METADATA, MANIFEST_NAME):
            if (ckpt / name).is_file():
                return _inside(ckpt, ckpt / name)
        raise FaultError(f"{ckpt} has neither {DCP_METADATA} nor {MANIFEST_NAME}")

    def _older_copy(self, root: Path, ckpt: Path, victim: Path) -> Path:
        rel = victim.relative_to(ckpt) if ckpt.is_dir() else None
        step = step_of(ckpt) or 0
        for older in reversed(committed_entries(root)):
            if (step_of(older) or 0) >= step:
                continue
            candidate = older / rel if rel is not None else older
            if candidate.is_file():
                return _inside(root, candidate)
        raise FaultError(f"no older checkpoint than {ckpt.name} holds {rel or 'a file'} to swap in; "
                         "trigger stale-shard after at least two commits (e.g. {on_event: ckpt_commit, nth: 2})")

    def _break_latest(self, run: RunContext, root: Path) -> dict[str, Any]:
        pointer = root / LATEST_NAME
        if not pointer.is_file() or pointer.is_symlink():
            raise FaultError(f"no 'latest' pointer file in {root} to break (this workload may not keep one)")
        _inside(root, pointer)
        before = pointer.read_text().strip()
        content = BROKEN_LATEST.encode()
        self._backup_then(run, pointer, xxhash.xxh3_128(content).hexdigest(),
                          lambda: _write_in_place(pointer, content))
        return {"mode": "break-latest", "path": str(pointer), "file": str(pointer), "was": before,
                "now": BROKEN_LATEST}

    # ---- acting -----------------------------------------------------------------------------

    def _backup_then(self, run: RunContext, victim: Path, left: str, act: Any) -> None:
        backups = run.run_dir.absolute() / "backups"
        backups.mkdir(exist_ok=True)
        backup = backups / f"fault{self.index}-{len(list(backups.iterdir()))}-{victim.name}"
        shutil.copy2(victim, backup)
        run.ledger.push(self.owner, RestoreIfUnchanged(str(victim), str(backup), left))
        try:
            act()
        except OSError as exc:
            raise FaultError(f"could not {self.config.mode} {victim}: {exc}") from None


def committed_entries(root: Path) -> list[Path]:
    """``step_*`` entries that claim to be committed, oldest first (in-progress and hidden ones skipped)."""
    entries = [p for p in root.iterdir() if STEP_ENTRY.match(p.name) and claims_committed(p)]
    return sorted(entries, key=lambda p: (step_of(p) or 0, p.name))


def _inside(root: Path, path: Path) -> Path:
    """``path`` with links resolved, refusing anything that escapes ``root`` (the blast radius)."""
    resolved = path.resolve()
    try:
        resolved.relative_to(root.resolve())
    except ValueError:
        raise FaultError(f"refusing to touch {path}: it resolves to {resolved}, outside the run's "
                         f"checkpoint directory {root}") from None
    return resolved


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink())


def _flip(path: Path, offset: int, bit: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        byte = os.pread(fd, 1, offset)
        os.pwrite(fd, bytes([byte[0] ^ (1 << bit)]), offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_with_copy(source: Path, victim: Path) -> None:
    # In place (same inode, like a writer that overwrote the shard), not a rename.
    with open(source, "rb") as src, open(victim, "r+b") as dst:
        dst.truncate(0)
        shutil.copyfileobj(src, dst, _CHUNK)
        dst.flush()
        os.fsync(dst.fileno())


def _write_in_place(path: Path, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(0)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _hash_prefix(path: Path, length: int) -> str:
    h = xxhash.xxh3_128()
    with open(path, "rb") as fh:
        left = length
        while left > 0:
            chunk = fh.read(min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def _hash_flipped(path: Path, offset: int, bit: int) -> str:
    """The xxh3-128 the file will have once the bit is flipped (computed before touching it)."""
    h = xxhash.xxh3_128()
    pos = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            if pos <= offset < pos + len(chunk):
                buf = bytearray(chunk)
                buf[offset - pos] ^= 1 << bit
                chunk = bytes(buf)
            h.update(chunk)
            pos += len(chunk)
    return h.hexdigest()
