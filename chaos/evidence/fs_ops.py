"""The checkpoint filesystem's own record of every change, in order: what the pointer named at the instant it moved.

The pointer watch (chaos.evidence.pointer) looks at what ``latest`` names some milliseconds after it moves; a
target still being written in that gap, and finished before the look, is not seen. Where the checkpoint
directory is the slow-storage mount (chaos.runtime.slowfs), the mount itself records every change it passes
through (``--oplog``): creates, writes, truncates, fsyncs, renames, links and removals, each with a sequence
number taken before its syscall (``b``) and one after (``e``) from one counter. Replaying them gives:

* every move of the pointer, at the operation that made it (a rename or link onto it, a symlink made there, a
  write into a pointer file), and the name it held from then on;
* every change under the named checkpoint while the pointer still named it: an operation on a path under it that
  had not finished before the move began (``e`` above the move's ``b``) and began before the next move finished.

A target the watch found whole at its look, and that nothing changed between the move and the look, was whole at
the move: the gap is closed. A target changed after the move was named while it was still being written, whatever
the look found. Each file's last fsync against its last write says whether the named data was durable (on the
device, not only in the page cache) when the pointer moved.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POINTER_MAX_BYTES = 4096
"""As chaos.evidence.pointer reads a pointer: a longer file (or binary) is a checkpoint in its own right."""
CHANGES = ("create", "write", "truncate", "unlink", "rmdir", "mkdir", "rename", "symlink", "link")
"""Operations that change a file's content or the namespace (an fsync changes neither)."""


@dataclass(frozen=True)
class Op:
    b: int
    e: int
    t: float
    op: str
    path: str
    fields: dict[str, Any]

    @property
    def to(self) -> str | None:
        """Where a rename or a hard link puts the path."""
        to = self.fields.get("to")
        return posixpath.normpath(to) if isinstance(to, str) else None

    def touches(self, path: str) -> bool:
        """This op changes ``path`` or something under it (or puts something there)."""
        if self.op not in CHANGES:
            return False
        return any(p is not None and (p == path or p.startswith(path.rstrip("/") + "/"))
                   for p in (self.path, self.to))


def read_ops(path: str | Path) -> tuple[list[Op], str | None]:
    """The ops in the order they finished, and what is wrong with the log (None: it reads whole). Only the last
    line may be cut short (the daemon is killed when the run ends); anything else unreadable spoils the log."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return [], f"the filesystem's op log {path} cannot be read ({exc.strerror or exc})"
    ops: list[Op] = []
    for n, line in enumerate(lines, start=1):
        try:
            d = json.loads(line)
            op = Op(int(d.pop("b")), int(d.pop("e")), float(d.pop("t")), str(d.pop("op")),
                    posixpath.normpath(str(d.pop("path"))), d)
        except (ValueError, KeyError, TypeError, AttributeError):
            if n == len(lines):
                break
            return [], f"the filesystem's op log {path} is broken at line {n} of {len(lines)}"
        if op.b >= op.e:
            return [], f"the filesystem's op log {path} is broken at line {n}: it ends before it begins"
        ops.append(op)
    ops.sort(key=lambda o: o.e)
    return ops, None


SELF = "self"
"""A file's content is large or binary: as a pointer, it names itself (chaos.evidence.pointer.read_pointer)."""


@dataclass(eq=False)
class _Entry:
    """A file or a symlink as the replay knows it (one object per inode: hard links share it)."""

    link: str | None = None
    content: bytearray | str | None = field(default_factory=bytearray)
    """A small file's bytes, rebuilt from every write to it; ``SELF``: large or binary; None: not known."""
    written: int = 0
    """``e`` of its last change of content."""
    synced: int = 0
    """``e`` of its last fsync."""


@dataclass
class PointerMove:
    op: Op
    name: str
    """What the pointer held from this op on (a name beside it, or a path)."""
    target: str | None
    """That name as a path in the mount, through any symlinks the replay knows (None: outside it, or unknown)."""
    until: int | None = None
    """``e`` of the next move (None: it named this to the end)."""
    changed: list[Op] = field(default_factory=list)
    """Changes under the target (or to its files through another name) while the pointer named it, the
    harness's own left out."""
    unsynced: list[str] = field(default_factory=list)
    """Files under the target written since their last fsync when the pointer moved."""
    files: set[int] = field(default_factory=set)
    """The target's files (``id`` of their entries) at the move."""


def _name(entry: _Entry | None, pointer: str) -> str | None:
    """What a pointer entry names, as chaos.evidence.pointer.read_pointer reads it (None: nothing, or not known)."""
    if entry is None:
        return None
    if entry.link is not None:
        return entry.link
    content = entry.content
    if content == SELF:
        return posixpath.basename(pointer)  # a checkpoint in its own right: it names itself
    if not isinstance(content, bytearray):
        return None
    if len(content) > POINTER_MAX_BYTES or b"\x00" in content:
        return posixpath.basename(pointer)
    try:
        text = content.decode("utf-8").strip()
    except UnicodeDecodeError:
        return posixpath.basename(pointer)
    if not text:
        return None
    return text if "\n" not in text else posixpath.basename(pointer)


def pointer_moves(ops: list[Op], pointer: str, mounts: str | list[str]) -> list[PointerMove]:
    """Every move of ``pointer`` (its path in the mount, ``/latest``), with what changed under its target while it
    named it and which of the target's files were not synced when it moved; ``mounts``: the mount's path on the
    host, as written and as resolved (an absolute symlink or a ``..`` name may spell either)."""
    pointer = posixpath.normpath(pointer)
    hosts = [mounts] if isinstance(mounts, str) else list(mounts)
    entries: dict[str, _Entry] = {}
    moves: list[PointerMove] = []
    touched: dict[int, _Entry] = {}
    """Index of each content op -> the entry it changed (a hard link's other names included)."""
    for i, op in enumerate(ops):
        before = _name(entries.get(pointer), pointer)
        replaced = _apply(entries, op)
        entry = entries.get(op.path)
        if entry is not None and op.op in ("write", "truncate", "create"):
            touched[i] = entry
        if pointer not in (op.path, op.to):
            continue
        name = _name(entries.get(pointer), pointer)
        if name is None or (name == before and not (replaced and op.to == pointer) and op.op != "symlink"):
            continue
        if moves and moves[-1].until is None:
            moves[-1].until = op.e
        target = _resolve(entries, _in_mount(name, pointer, hosts))
        files = {p: e for p, e in entries.items() if target is not None and e.link is None
                 and (p == target or p.startswith(target + "/"))}
        moves.append(PointerMove(op, name, target, unsynced=sorted(p for p, e in files.items() if e.synced < e.written),
                                 files={id(e) for e in files.values()}))
    moving = {id(m.op) for m in moves}
    for m in moves:
        if m.target is None:
            continue
        m.changed = [o for i, o in enumerate(ops) if id(o) not in moving and not o.fields.get("harness")
                     and o.e > m.op.b and (m.until is None or o.b < m.until)
                     and (o.touches(m.target) or (i in touched and id(touched[i]) in m.files))]
    return moves


def _in_mount(name: str, pointer: str, hosts: list[str]) -> str | None:
    """``name`` (what the pointer holds) as a path in the mount, or None where it leads outside it."""
    for host in hosts:
        host = posixpath.normpath(host)
        where = posixpath.normpath(name if posixpath.isabs(name)
                                   else posixpath.join(host + posixpath.dirname(pointer), name))
        rel = posixpath.relpath(where, host)
        if rel == "." or not (rel == ".." or rel.startswith("../")):
            return posixpath.normpath("/" + rel)
    return None


def _resolve(entries: dict[str, _Entry], path: str | None, hops: int = 8) -> str | None:
    """``path`` through the symlinks the replay knows (a ``current`` link to ``step_10``): the kernel resolves them
    before the mount sees a write, so the writes name the real path. None: a link that leads out of the mount."""
    for _ in range(hops):
        if path is None:
            return None
        parts = path.strip("/").split("/")
        for n in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:n])
            link = entries.get(prefix)
            if link is not None and link.link is not None:
                if posixpath.isabs(link.link):
                    return None  # an absolute link names the host's path: not followed here
                rest = "/".join(parts[n:])
                path = posixpath.normpath(posixpath.join(posixpath.dirname(prefix), link.link, rest))
                if path.startswith("/.."):
                    return None
                break
        else:
            return path
    return None


def _splice(entry: _Entry, op: Op) -> None:
    """A write's bytes into a small file's content (known only while every write to it was logged with them)."""
    head, offset, size = op.fields.get("head"), op.fields.get("offset"), op.fields.get("size")
    if not isinstance(head, str) or not isinstance(offset, int):
        entry.content = SELF  # large, or binary: the op log did not carry its bytes
        return
    if not isinstance(entry.content, bytearray):
        return  # SELF stays itself; an unknown file stays unknown
    data = head.encode("utf-8")[: size if isinstance(size, int) else None]
    content = entry.content
    if offset > len(content):
        content.extend(b"\x00" * (offset - len(content)))
    content[offset:offset + len(data)] = data


def _apply(entries: dict[str, _Entry], op: Op) -> bool:
    """Replay one op; True when it put a new entry at ``op.to`` (a rename or link onto a path)."""
    path, f = op.path, op.fields
    if op.op == "create":
        entries[path] = _Entry(written=op.e)
    elif op.op == "write":
        entry = entries.setdefault(path, _Entry(content=None))
        if f.get("size") != 0:
            _splice(entry, op)
        entry.written = op.e
    elif op.op == "truncate":
        entry = entries.setdefault(path, _Entry(content=None))
        length = f.get("length")
        if not isinstance(length, int):
            entry.content = None
        elif length == 0:
            entry.content = bytearray()
        elif isinstance(entry.content, bytearray):
            del entry.content[length:]
            entry.content.extend(b"\x00" * (length - len(entry.content)))
        elif length > POINTER_MAX_BYTES:
            entry.content = SELF
        elif entry.content == SELF:
            entry.content = None  # cut to a length whose bytes were never seen
        entry.written = op.e
    elif op.op == "fsync":
        if path in entries:
            entries[path].synced = op.e
    elif op.op == "unlink":
        entries.pop(path, None)
    elif op.op == "symlink":
        entries[path] = _Entry(link=str(f.get("target")), content=None, written=op.e)
    elif op.op == "link" and op.to is not None and path in entries:
        entries[op.to] = entries[path]
        return True
    elif op.op == "rename" and op.to is not None:
        moved = {p: e for p, e in entries.items() if p == path or p.startswith(path + "/")}
        if not moved:
            return False
        for p in [p for p in entries if p == op.to or p.startswith(op.to + "/")]:
            del entries[p]
        for p, e in moved.items():
            del entries[p]
            entries[op.to + p[len(path):]] = e
        return True
    return False
