"""The driver's XID line: write it the way NVRM does, parse it back, and map device index <-> PCI bus id."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Bus numbers of the eight GPUs of a DGX A100-class board, in NVML index order: a plausible,
# fixed layout so a simulated XID names the same "card" every run.
_BOARD_BUSES = (0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD)

# What the driver prints after the code, per XID (the seeds' table, in the driver's words).
XID_TEXT = {
    13: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
    31: "Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_00000000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_READ",
    43: "Ch 00000008",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, "
        "subpartition 0.",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap a row; the GPU needs a reset and possibly an RMA.",
    74: "NVLink: fatal error detected on link 2(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate detected.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL).",
}

# Driver lines: "NVRM: Xid (PCI:0000:c1:00): 79, pid=..., ..." (older drivers omit "PCI:"), with any
# dmesg / journal prefix before it.
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?\): "
    r"(?P<code>\d+),\s*(?P<rest>.*)$")
_PID_RE = re.compile(r"pid=(?:'(?P<q>[^']*)'|(?P<n>[^,\s]+))")


@dataclass(frozen=True)
class XidLine:
    """One parsed XID report."""

    code: int
    bus_id: str
    """Normalised ``0000:07:00`` (domain:bus:device, lower case)."""
    pid: int | None
    text: str
    raw: str


def bus_id_for(index: int) -> str:
    """The plausible PCI bus id of simulated GPU ``index`` (deterministic; eight per PCI domain)."""
    if index < 0:
        raise ValueError(f"device index must be >= 0, got {index}")
    domain, slot = divmod(index, len(_BOARD_BUSES))
    return f"{domain:04x}:{_BOARD_BUSES[slot]:02x}:00"


def index_for(bus_id: str) -> int | None:
    """The simulated device index of a bus id (inverse of ``bus_id_for``); None for a bus no simulated GPU has."""
    norm = normalise_bus_id(bus_id)
    if norm is None:
        return None
    domain_s, bus_s, dev_s = norm.split(":")
    bus = int(bus_s, 16)
    if dev_s != "00" or bus not in _BOARD_BUSES:
        return None
    return int(domain_s, 16) * len(_BOARD_BUSES) + _BOARD_BUSES.index(bus)


def normalise_bus_id(bus_id: str) -> str | None:
    """``PCI:0000:C1:00.0`` / ``00000000:C1:00.0`` / ``0000:c1:00`` -> ``0000:c1:00``; None when it is not a bus id."""
    m = re.fullmatch(r"(?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?",
                     bus_id.strip())
    if not m:
        return None
    return f"{int(m.group(1), 16):04x}:{m.group(2).lower()}:{m.group(3).lower()}"


def format_xid_line(code: int, bus_id: str, pid: int | None = None, name: str | None = None,
                    text: str | None = None) -> str:
    """The line NVRM writes, without a trailing newline (``pid=`` quoted as the driver does when unknown)."""
    norm = normalise_bus_id(bus_id)
    if norm is None:
        raise ValueError(f"not a PCI bus id: {bus_id!r} (expected e.g. 0000:c1:00)")
    pid_s = str(pid) if pid is not None else "'<unknown>'"
    name_s = name if name else "<unknown>"
    return f"NVRM: Xid (PCI:{norm}): {code}, pid={pid_s}, name={name_s}, {text or XID_TEXT.get(code, 'Unknown error')}"


def parse_xid_line(line: str) -> XidLine | None:
    """The XID in a kernel-log line (any prefix), or None for every other line."""
    m = _XID_RE.search(line.rstrip("\n"))
    if not m:
        return None
    rest = m.group("rest")
    pid = None
    pm = _PID_RE.search(rest)
    if pm and (pm.group("n") or "").isdigit():
        pid = int(pm.group("n"))
    return XidLine(code=int(m.group("code")), bus_id=normalise_bus_id(m.group("bus")) or m.group("bus"),
                   pid=pid, text=rest, raw=line.rstrip("\n"))
