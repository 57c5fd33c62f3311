"""A slow filesystem: a FUSE passthrough mounted over the checkpoint directory that delays what it is told to.

    python -m chaos.runtime.slowfs BACKING MOUNT --control CONTROL.json --stats STATS.json

Every operation goes through to ``BACKING`` (a plain directory); what ``CONTROL`` says at the moment
slows it: ``write_mbps`` caps the bandwidth of writes (one budget for all writers, as one disk or
link is shared: a token bucket), ``latency_ms`` is added to every write, fsync and metadata change,
and ``stall_until`` (Unix time) blocks every operation, reads included, until then (a storage
outage: an NFS server gone, a full-disk hiccup). ``fail`` makes the writes to some files fail
(``{"paths": [glob, ...], "errno": "EIO"}``: creating, writing, truncating or syncing a file whose path
in the mount matches; one rank's shard, while the other ranks' writes succeed). The control file is re-read when it changes, so
the fault (chaos.faults.slow_storage) turns the slowness on and off while the mount stays; ``STATS``
says what was delayed, rewritten as it goes. ``--oplog OPS.jsonl`` records every change it passes
through, in order (chaos.evidence.fs_ops reads it: what the checkpoint pointer named at the instant
it moved, and whether its files changed after). The harness mounts it before launch, when the directory
is still empty, and unmounts it when the run ends, then moves the checkpoints back into the plain
directory (chaos/faults/slow_storage.py registers each step in the ledger first).

mfusepy (the maintained fork of fusepy) over libfuse 2 or 3 (Debian: libfuse2); root mounts it
directly. Each FUSE request runs in its own thread, so one stalled write does not stop a read.
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import json
import os
import threading
import time
from typing import Any

FAIL_OPS = ("create", "write", "truncate", "fsync")
"""What a ``fail`` rule fails by default: everything that puts data in a file."""
MAX_FAILURES = 50
"""Failed operations listed one by one in the stats (all are counted)."""
STAT_KEYS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid", "st_blocks",
             "st_ino", "st_dev")


class Control:
    """What the control file says now (re-read whenever it was replaced)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self.state: dict[str, Any] = {}
        self._lock = threading.Lock()

    def now(self) -> dict[str, Any]:
        # A stat per operation (microseconds): the fault's change applies from the very next operation on.
        with self._lock:
            try:
                st = os.stat(self.path)
                # The inode too: the fault replaces the file whole, maybe within one tick of the clock.
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                if stamp != self._stamp:
                    with open(self.path, encoding="utf-8") as fh:
                        self.state = json.load(fh)
                    self._stamp = stamp
            except (OSError, ValueError):
                pass  # no file (yet), or half written: keep what was said last
            return self.state


OPLOG_NAME = "slowfs-ops.jsonl"
"""The op log's name in the run directory, where chaos.faults.slow_storage has the daemon write it."""
HEAD_BYTES = 4096
"""A write that ends within this many bytes of a file's start carries its bytes in the op log (as text, when they
are text): a pointer file's content, rebuilt exactly however many writes it took."""


class OpLog:
    """Every change the mount passes through, one JSON line each, in the order they happened.

    Each op takes a sequence number before its syscall (``b``) and one after (``e``) from one counter: an op
    whose ``b`` is above another's ``e`` began after the other had finished, whatever order the lines were
    written in (each request runs in its own thread). A failed op is not written: it changed nothing."""

    def __init__(self, path: str | None, clock: Any = time, harness_pid: int | None = None,
                 caller: Any = None) -> None:
        self.clock = clock
        self.harness_pid = harness_pid
        """Ops this process (any of its threads) asks for are marked ``harness``: a fault's own change (a corrupted
        checkpoint, a broken pointer) is not the workload's."""
        self.caller = caller or (lambda: None)
        """The pid (a thread's id, as the kernel gives it to FUSE) of the process asking for the op now."""
        self._lock = threading.Lock()
        self._seq = 0
        self._fh = open(path, "a", encoding="utf-8") if path else None

    def begin(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def done(self, b: int, op: str, path: str, **fields: Any) -> None:
        if self._fh is None:
            return
        if self.harness_pid is not None and self._by_harness():
            fields = {**fields, "harness": True}
        with self._lock:
            self._seq += 1
            line = json.dumps({"b": b, "e": self._seq, "t": round(self.clock.time(), 6), "op": op, "path": path,
                               **fields})
            self._fh.write(line + "\n")
            self._fh.flush()  # the daemon is killed when the run ends: every line already out is kept


    def _by_harness(self) -> bool:
        tid = self.caller()
        return isinstance(tid, int) and tid > 0 and (
            tid == self.harness_pid or os.path.exists(f"/proc/{self.harness_pid}/task/{tid}"))


def head_of(data: bytes, offset: int) -> dict[str, str]:
    """A write near a file's start with its text (a pointer's name), for the op log; nothing for anything else."""
    if offset + len(data) > HEAD_BYTES or b"\x00" in data:
        return {}
    try:
        return {"head": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {}


class Pacer:
    """Applies the control: one bandwidth budget for every writer, plus latency and stalls; counts what it did."""

    def __init__(self, control: Control, stats_path: str | None, clock: Any = time) -> None:
        self.control = control
        self.stats_path = stats_path
        self.clock = clock
        self._lock = threading.Lock()
        self._free_at = 0.0
        self.stats: dict[str, Any] = {"ops_delayed": 0, "delay_s": 0.0, "bytes_written": 0, "stalled_ops": 0,
                                      "stall_s": 0.0, "failed_ops": 0, "failures": []}

    def delay(self, op: str, nbytes: int = 0) -> float:
        """How long ``op`` of ``nbytes`` waits now (and reserve its share of the bandwidth)."""
        c = self.control.now()
        now = self.clock.time()
        wait = 0.0
        stalled = 0.0
        until = c.get("stall_until")
        if isinstance(until, (int, float)) and until > now:
            stalled = until - now
        if op != "read":
            wait += float(c.get("latency_ms") or 0) / 1000.0
        mbps = c.get("write_mbps")
        with self._lock:
            if op == "write" and isinstance(mbps, (int, float)) and mbps > 0:
                start = max(now + stalled, self._free_at)
                self._free_at = start + nbytes / (mbps * 1e6)
                wait = max(wait, self._free_at - now - stalled)
            total = stalled + wait
            if op == "write":
                self.stats["bytes_written"] += nbytes
            if total > 0:
                self.stats["ops_delayed"] += 1
                self.stats["delay_s"] += total
            if stalled > 0:
                self.stats["stalled_ops"] += 1
                self.stats["stall_s"] += stalled
        return total

    def failure(self, op: str, path: str) -> int | None:
        """The errno ``op`` on ``path`` (relative to the mount) fails with now, or None (recorded when it fails)."""
        rule = self.control.now().get("fail")
        if not isinstance(rule, dict) or op not in rule.get("ops", FAIL_OPS):
            return None
        rel = path.lstrip("/")
        if not any(fnmatch.fnmatch(rel, str(g)) for g in rule.get("paths") or []):
            return None
        code = getattr(errno, str(rule.get("errno", "EIO")), errno.EIO)
        with self._lock:
            self.stats["failed_ops"] += 1
            if len(self.stats["failures"]) < MAX_FAILURES:
                self.stats["failures"].append({"t": round(self.clock.time(), 6), "op": op, "path": rel,
                                               "errno": errno.errorcode.get(code, str(code))})
        return code

    def pace(self, op: str, nbytes: int = 0) -> None:
        wait = self.delay(op, nbytes)
        if wait > 0:
            time.sleep(wait)

    def write_stats(self) -> None:
        if not self.stats_path:
            return
        with self._lock:
            data = json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in self.stats.items()},
                              default=list)
        tmp = f"{self.stats_path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.replace(tmp, self.stats_path)
        except OSError:
            pass

    def keep_writing_stats(self, every_s: float = 0.1) -> None:
        """A daemon thread: the stats file, rewritten while the mount lives (what the fault logs on revert)."""
        def loop() -> None:
            while True:
                time.sleep(every_s)
                self.write_stats()

        threading.Thread(target=loop, daemon=True, name="slowfs-stats").start()


def operations(backing: str, pacer: Pacer, ops: OpLog | None = None) -> Any:
    import mfusepy as fuse

    log = ops or OpLog(None)

    class SlowFs(fuse.Operations):
        """A passthrough to ``backing``, paced (chaos.runtime.slowfs)."""

        use_ns = True

        def _p(self, path: str) -> str:
            return os.path.join(backing, path.lstrip("/"))

        def access(self, path: str, amode: int) -> int:
            pacer.pace("read")
            if not os.access(self._p(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            pacer.pace("read")
            st = os.lstat(self._p(path))
            out = {k: getattr(st, k) for k in STAT_KEYS}
            for k in ("st_atime", "st_ctime", "st_mtime"):
                out[k] = getattr(st, f"{k}_ns")
            return out

        def readdir(self, path: str, fh: Any) -> list[str]:
            pacer.pace("read")
            return [".", "..", *os.listdir(self._p(path))]

        def readlink(self, path: str) -> str:
            pacer.pace("read")
            return os.readlink(self._p(path))

        def statfs(self, path: str) -> dict[str, Any]:
            st = os.statvfs(self._p(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def open(self, path: str, flags: int) -> int:
            pacer.pace("read")
            b = log.begin()
            fh = os.open(self._p(path), flags)
            if flags & os.O_TRUNC:
                log.done(b, "truncate", path, length=0)
            return fh

        def _fail(self, op: str, path: str) -> None:
            code = pacer.failure(op, path)
            if code is not None:
                raise fuse.FuseOSError(code)

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            pacer.pace("meta")
            self._fail("create", path)
            b = log.begin()
            fh = os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            log.done(b, "create", path)
            return fh

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            pacer.pace("read")
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            pacer.pace("write", len(data))
            self._fail("write", path)
            b = log.begin()
            n = os.pwrite(fh, data, offset)
            log.done(b, "write", path, offset=offset, size=n, **head_of(data[:n], offset))
            return n

        def truncate(self, path: str, length: int, fh: Any = None) -> None:
            pacer.pace("meta")
            self._fail("truncate", path)
            b = log.begin()
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._p(path), length)
            log.done(b, "truncate", path, length=length)

        def flush(self, path: str, fh: int) -> None:
            return None

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            pacer.pace("sync")
            self._fail("fsync", path)
            b = log.begin()
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)
            log.done(b, "fsync", path)

        def fsyncdir(self, path: str, datasync: int, fh: Any) -> None:
            pacer.pace("sync")
            log.done(log.begin(), "fsyncdir", path)

        def unlink(self, path: str) -> None:
            pacer.pace("meta")
            b = log.begin()
            os.unlink(self._p(path))
            log.done(b, "unlink", path)

        def rmdir(self, path: str) -> None:
            pacer.pace("meta")
            b = log.begin()
            os.rmdir(self._p(path))
            log.done(b, "rmdir", path)

        def mkdir(self, path: str, mode: int) -> None:
            pacer.pace("meta")
            b = log.begin()
            os.mkdir(self._p(path), mode)
            log.done(b, "mkdir", path)

        def rename(self, old: str, new: str) -> None:
            pacer.pace("meta")
            b = log.begin()
            os.rename(self._p(old), self._p(new))
            log.done(b, "rename", old, to=new)

        def symlink(self, target: str, source: str) -> None:
            pacer.pace("meta")
            b = log.begin()
            os.symlink(source, self._p(target))
            log.done(b, "symlink", target, target=source)

        def link(self, target: str, source: str) -> None:
            pacer.pace("meta")
            b = log.begin()
            os.link(self._p(source), self._p(target))
            log.done(b, "link", source, to=target)

        def chmod(self, path: str, mode: int) -> None:
            pacer.pace("meta")
            os.chmod(self._p(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            pacer.pace("meta")
            os.chown(self._p(path), uid, gid)

        def utimens(self, path: str, times: Any = None) -> None:
            pacer.pace("meta")
            os.utime(self._p(path), ns=times) if times else os.utime(self._p(path))

    return SlowFs()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("backing")
    p.add_argument("mount")
    p.add_argument("--control", required=True)
    p.add_argument("--stats")
    p.add_argument("--oplog", help="record every change passed through, in order (JSON lines)")
    p.add_argument("--harness-pid", type=int, help="mark the ops this process asks for (the faults' own)")
    a = p.parse_args(argv)
    import mfusepy as fuse

    pacer = Pacer(Control(a.control), a.stats)
    pacer.keep_writing_stats()
    # libfuse 2 splits writes into 4 KiB requests unless asked for big ones (libfuse 3 always sends them).
    big = {"big_writes": True} if fuse.fuse_version_major == 2 else {}
    try:
        # No cached names or attributes: every open and stat asks the daemon, so a stall stops them as an outage
        # does (file data may still come from the page cache, as from a real client's).
        ops = OpLog(a.oplog, harness_pid=a.harness_pid, caller=lambda: fuse.fuse_get_context()[2])
        fuse.FUSE(operations(os.path.abspath(a.backing), pacer, ops), a.mount, foreground=True, nothreads=False,
                  allow_other=True, fsname="chaos-slowfs", attr_timeout=0, entry_timeout=0, negative_timeout=0,
                  **big)
    finally:
        pacer.write_stats()


if __name__ == "__main__":
    main()
