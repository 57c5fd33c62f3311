"""What a node says about itself before a job starts, each as a ``Probe`` (ok or not, and why): XIDs in its kernel
log, NVML's device state, DCGM's diagnostic, a round trip through its checkpoint storage. The reference pre-flight
gate (chaos.health.preflight) runs them on each node before its process group forms."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

from chaos.health.policy import classify
from chaos.health.xidline import format_xid_line, parse_xid_line


@dataclass
class Probe:
    name: str
    ok: bool
    detail: str
    skipped: bool = False
    figure: float | None = None
    """What it measured, where the baseline compares it (the storage probe's write MB/s)."""


def xid_lines(spec: str) -> tuple[list[str], str | None]:
    """Every kernel-log line a source holds now (from its beginning), or why it cannot be read."""
    kind, _, arg = spec.partition(":")
    if kind == "file":
        path = arg.replace("{host}", os.environ.get("CHAOS_HOST") or socket.gethostname())
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read().splitlines(), None
        except FileNotFoundError:
            return [], None  # no log yet: nothing was reported
        except OSError as exc:
            return [], f"{path}: {exc.strerror}"
    if kind == "kmsg":
        try:
            fd = os.open(arg or "/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            return [], f"/dev/kmsg: {exc.strerror}"
        lines = []
        try:
            while True:
                try:
                    record = os.read(fd, 8192)
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno == errno.EPIPE:
                        continue
                    break
                if not record:
                    break
                lines.append(record.decode("utf-8", "replace").split(";", 1)[-1])
        finally:
            os.close(fd)
        return lines, None
    if kind == "nvml" and arg:
        try:
            with open(arg, encoding="utf-8") as fh:
                state = json.load(fh)
        except (OSError, ValueError) as exc:
            return [], f"{arg}: {exc}"
        return [format_xid_line(e["code"], state["devices"][e["device"]]["bus_id"], text="simulated NVML event")
                for e in state.get("events", [])], None
    return [], None  # journal, dcgm, real nvml: read by the nvml probe or not scannable from their start


def kernel_log_probe(sources: list[str]) -> Probe:
    bad, noted, unread = [], [], []
    for spec in sources:
        lines, why = xid_lines(spec)
        if why:
            unread.append(why)
        for line in lines:
            xid = parse_xid_line(line)
            if xid is None:
                continue
            row = classify(xid.code)
            (bad if row.category in ("hardware", "degrading") else noted).append(f"XID {xid.code} ({row.meaning})")
    if bad:
        return Probe("kernel_log", False, f"{bad[0]}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else ""))
    if unread and len(unread) == len(sources):
        return Probe("kernel_log", True, f"skipped: {'; '.join(unread)}", skipped=True)
    return Probe("kernel_log", True, f"no node XID in {len(sources) - len(unread)} source(s)"
                 + (f"; noted {', '.join(noted)}" if noted else ""))


def nvml_probe(sources: list[str]) -> Probe:
    from chaos.health.nvml import open_nvml
    from chaos.health.sighting import SourceUnavailable

    sim = next((s.partition(":")[2] for s in sources if s.startswith("nvml:")), None)
    try:
        nvml = open_nvml(sim)
    except (SourceUnavailable, OSError, ImportError) as exc:
        return Probe("nvml", True, f"skipped: no NVML ({exc})", skipped=True)
    try:
        for i in range(nvml.device_count()):
            st = nvml.state(i)
            if st.ecc_uncorrected:
                return Probe("nvml", False, f"GPU {i} ({st.bus_id}): {st.ecc_uncorrected} uncorrected ECC error(s)")
            slow = [r for r in st.throttle_reasons if "hw" in r.lower() or "slowdown" in r.lower()]
            if slow:
                return Probe("nvml", False, f"GPU {i} ({st.bus_id}): throttled ({', '.join(slow)})")
        return Probe("nvml", True, f"{nvml.device_count()} device(s) healthy")
    finally:
        nvml.close()


def dcgm_probe(level: int, timeout_s: float, run: Callable[..., Any] | None = None) -> Probe:
    """DCGM's own diagnostic (``dcgmi diag -r LEVEL``) where DCGM is installed: non-zero (a failed test) fails."""
    import shutil
    import subprocess

    if level <= 0:
        return Probe("dcgm", True, "skipped: --dcgm-level 0", skipped=True)
    if shutil.which("dcgmi") is None:
        return Probe("dcgm", True, "skipped: no dcgmi (DCGM is not installed)", skipped=True)
    try:
        done = (run or subprocess.run)(["dcgmi", "diag", "-r", str(level)], capture_output=True, text=True,
                                       timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Probe("dcgm", False, f"dcgmi diag -r {level} did not finish in {timeout_s:g} s")
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if "fail" in ln.lower()]
        return Probe("dcgm", False, f"dcgmi diag -r {level} exited {done.returncode}"
                     + (f": {lines[0][:200]}" if lines else ""))
    return Probe("dcgm", True, f"dcgmi diag -r {level} passed")


def storage_probe(folder: str, mib: float, tag: str) -> Probe:
    """Write, fsync, read back and compare ``mib`` MiB in ``folder``; the file is removed either way."""
    path = os.path.join(folder, f".preflight-{tag}-{os.getpid()}")
    data = os.urandom(max(1, int(mib * (1 << 20))))
    want = hashlib.blake2b(data).hexdigest()
    t0 = time.monotonic()
    try:
        os.makedirs(folder, exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        written = time.monotonic() - t0
        with open(path, "rb") as fh:
            got = hashlib.blake2b(fh.read()).hexdigest()
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "error")
        return Probe("storage", False, f"{folder}: {name} ({exc.strerror})")
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if got != want:
        return Probe("storage", False, f"{folder}: read back differs from what was written")
    mbps = len(data) / 1e6 / max(written, 1e-6)
    return Probe("storage", True, f"{mib:g} MiB round trip in {time.monotonic() - t0:.3f} s ({mbps:.1f} MB/s written)",
                 figure=mbps)
