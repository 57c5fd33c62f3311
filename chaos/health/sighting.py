"""What every XID source yields (a ``Sighting``), the ``Source`` interface, and the error for a source this host lacks.

Its own module so that the kernel-log sources (chaos.health.sources) and NVML (chaos.health.nvml) both
build on it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SourceUnavailable(Exception):
    """This host cannot provide the source; the message says why and how to enable it."""


@dataclass(frozen=True)
class Sighting:
    """One XID as a source saw it: the device by bus id (kernel log) or by index (NVML, DCGM)."""

    source: str
    code: int
    bus_id: str | None
    device: int | None
    raw: str
    pid: int | None = None


class Source(Protocol):
    name: str

    def read(self, timeout_s: float) -> list[Sighting]:
        """New sightings, waiting at most ``timeout_s`` for the first."""

    def close(self) -> None:
        """Release the file, fd or child process."""
