"""Where XIDs are seen: a kernel-log file, /dev/kmsg, ``journalctl -k -f`` and ``dcgmi dmon``, each followed from its end.

Every source has ``read(timeout_s) -> list[Sighting]`` that blocks at most ``timeout_s`` and returns
as soon as something arrives: /dev/kmsg and the pipes wait in ``select``; a regular file always
selects readable, so it is re-read every ``interval_s`` (5 ms), which is what keeps a line's
detection well under 50 ms without inotify.
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import socket
import subprocess
import time

from chaos.health.sighting import Sighting, Source, SourceUnavailable
from chaos.health.xidline import bus_id_for, parse_xid_line

__all__ = ["DcgmSource", "FileSource", "JournalSource", "KmsgSource", "Sighting", "Source", "SourceUnavailable",
           "open_source"]


def _sightings(source: str, lines: list[str]) -> list[Sighting]:
    out = []
    for line in lines:
        xid = parse_xid_line(line)
        if xid is not None:
            out.append(Sighting(source, xid.code, xid.bus_id, None, xid.raw, xid.pid))
    return out


class FileSource:
    """Follows a kernel-log file (``tail -F -n0``): starts at its end, survives truncation and rotation."""

    name = "file"

    def __init__(self, path: str | os.PathLike[str], interval_s: float = 0.005, from_start: bool = False,
                 sleep=time.sleep) -> None:
        self.path = os.fspath(path)
        self.interval_s = interval_s
        self.sleep = sleep
        self._fh = None
        self._ino: int | None = None
        self._partial = b""
        self._from_start = from_start

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            self._from_start = True  # whatever is written once it appears is new
            return False
        st = os.fstat(fh.fileno())
        if not self._from_start:
            fh.seek(0, os.SEEK_END)
        self._from_start = True  # a file that appears or is rotated later is read from its beginning
        self._fh, self._ino, self._partial = fh, st.st_ino, b""
        return True

    def _reopen_if_rotated(self) -> bool:
        """True when the path now names a new (or newly created, or truncated) file, opened at its start."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        if self._fh is None:
            return self._open()
        if st.st_ino != self._ino or st.st_size < self._fh.tell():
            self._fh.close()
            self._fh = None
            return self._open()
        return False

    def read(self, timeout_s: float) -> list[Sighting]:
        deadline = time.monotonic() + timeout_s
        if self._fh is None:
            self._open()
        while True:
            if self._fh is not None:
                data = self._fh.read()
                if data:
                    data = self._partial + data
                    *lines, self._partial = data.split(b"\n")
                    found = _sightings(self.name, [ln.decode(errors="replace") for ln in lines])
                    if found:
                        return found
                    continue
            if self._reopen_if_rotated():
                continue
            if time.monotonic() >= deadline:
                return []
            self.sleep(self.interval_s)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class KmsgSource:
    """Reads /dev/kmsg (the kernel ring buffer, one record per read) from its current end."""

    name = "kmsg"
    path = "/dev/kmsg"

    def __init__(self, path: str | None = None) -> None:
        self.path = path or self.path
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except PermissionError:
            raise SourceUnavailable(f"cannot read {self.path}: run the workload as root, or set "
                                    f"kernel.dmesg_restrict=0 (sysctl -w kernel.dmesg_restrict=0)") from None
        except FileNotFoundError:
            raise SourceUnavailable(f"{self.path} does not exist (not Linux, or a container without it); "
                                    f"use the file or journal source") from None
        os.lseek(self._fd, 0, os.SEEK_END)

    def read(self, timeout_s: float) -> list[Sighting]:
        ready, _, _ = select.select([self._fd], [], [], timeout_s)
        if not ready:
            return []
        lines = []
        while True:
            try:
                record = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the ring overwrote records we had not read: go on
                    continue
                raise
            if not record:
                break
            # "prio,seq,usec,flags;message\n continuation lines"
            text = record.decode(errors="replace")
            lines.append(text.split(";", 1)[1].split("\n", 1)[0] if ";" in text else text)
        return _sightings(self.name, lines)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _PipeSource:
    """A child process whose stdout is followed line by line through ``select``."""

    name = "pipe"

    def __init__(self, argv: list[str]) -> None:
        if shutil.which(argv[0]) is None:
            raise SourceUnavailable(f"'{argv[0]}' is not installed")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self._partial = b""

    def read_lines(self, timeout_s: float) -> list[str]:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        ready, _, _ = select.select([fd], [], [], timeout_s)
        if not ready:
            return []
        data = os.read(fd, 65536)
        if not data:
            raise SourceUnavailable(f"{self.proc.args[0]} exited with {self.proc.wait()}")
        *lines, self._partial = (self._partial + data).split(b"\n")
        return [ln.decode(errors="replace") for ln in lines]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class JournalSource(_PipeSource):
    """``journalctl -k -f -n0``: the kernel log through systemd-journald."""

    name = "journal"

    def __init__(self) -> None:
        super().__init__(["journalctl", "-k", "-f", "-n", "0", "-o", "cat"])

    def read(self, timeout_s: float) -> list[Sighting]:
        return _sightings(self.name, self.read_lines(timeout_s))


class DcgmSource(_PipeSource):
    """``dcgmi dmon -e 230``: DCGM's XID field (230) per GPU, every 100 ms; a change to non-zero is an XID."""

    name = "dcgm"

    def __init__(self) -> None:
        super().__init__(["dcgmi", "dmon", "-e", "230", "-d", "100"])
        self._last: dict[int, int] = {}

    def read(self, timeout_s: float) -> list[Sighting]:
        out = []
        for line in self.read_lines(timeout_s):
            parts = line.split()
            # "GPU 0     79"; header lines start with '#' or 'ID'
            if len(parts) < 3 or parts[0] != "GPU" or not parts[1].isdigit() or not parts[2].isdigit():
                continue
            index, code = int(parts[1]), int(parts[2])
            if code and self._last.get(index) != code:
                out.append(Sighting(self.name, code, bus_id_for(index), index, line.strip()))
            self._last[index] = code
        return out


def open_source(spec: str) -> Source:
    """``file:/path`` | ``kmsg`` | ``journal`` | ``dcgm`` | ``nvml`` (real NVML) | ``nvml:/path/state.json`` (simulated)."""
    kind, _, arg = spec.partition(":")
    if kind == "file":
        if not arg:
            raise SourceUnavailable("the file source needs a path: file:/path/to/kernel.log")
        # {host}: this node's own log where the nodes share a directory (the harness's multi-node
        # targets keep one simulated kernel log per node in the run directory).
        return FileSource(arg.replace("{host}", os.environ.get("CHAOS_HOST") or socket.gethostname()))
    if kind == "kmsg":
        return KmsgSource(arg or None)
    if kind == "journal":
        return JournalSource()
    if kind == "dcgm":
        return DcgmSource()
    if kind == "nvml":
        from chaos.health.nvml import NvmlSource, open_nvml

        return NvmlSource(open_nvml(arg or None))
    raise SourceUnavailable(f"unknown health source '{spec}'; known: file:PATH, kmsg, journal, dcgm, nvml, nvml:STATE")
