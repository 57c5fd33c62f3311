"""Reading the event protocol: follow JSONL files as they grow, and query the merged history."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

Record = dict[str, Any]

HARNESS_LOG = "harness.jsonl"


class EventTail:
    """Follows every ``*.jsonl`` file in a directory, returning only complete new lines.

    A line still being written (no trailing newline yet) is kept back until it is whole, so a
    reader racing a writer never sees half a record.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self.bad_lines: list[tuple[str, str]] = []

    def poll(self) -> list[Record]:
        out: list[Record] = []
        try:
            paths = sorted(self.directory.glob("*.jsonl"))
        except OSError:
            return out
        for path in paths:
            out.extend(self._read_new(path))
        return out

    def _read_new(self, path: Path) -> Iterator[Record]:
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return
        if not data:
            return
        self._offsets[path] = offset + len(data)
        data = self._partial.pop(path, b"") + data
        lines = data.split(b"\n")
        if lines[-1]:
            self._partial[path] = lines[-1]
        for line in lines[:-1]:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                self.bad_lines.append((path.name, line[:200].decode(errors="replace")))
                continue
            if isinstance(record, dict) and "ev" in record:
                yield record


def read_records(paths: Iterable[str | os.PathLike[str]]) -> list[Record]:
    """Every well-formed record of the given files or directories, merged by ``t``."""
    records: list[Record] = []
    for p in paths:
        p = Path(p)
        tail = EventTail(p if p.is_dir() else p.parent)
        if p.is_dir():
            records.extend(tail.poll())
        elif p.exists():
            records.extend(tail._read_new(p))
    return sorted(records, key=lambda r: r.get("t", 0.0))


def attempt_key(attempt: str) -> tuple[int, ...]:
    """Order attempts ``"0.2" < "0.10" < "1.0"`` numerically."""
    try:
        return tuple(int(x) for x in str(attempt).split("."))
    except ValueError:
        return (1 << 30,)


@dataclass
class History:
    """The whole run as one time-ordered list of workload and harness records."""

    records: list[Record] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.records.sort(key=lambda r: r.get("t", 0.0))

    @classmethod
    def from_run_dir(cls, run_dir: str | os.PathLike[str]) -> "History":
        run_dir = Path(run_dir)
        return cls(read_records([run_dir / "events", run_dir / HARNESS_LOG]))

    def add(self, records: Iterable[Record]) -> None:
        self.records.extend(records)
        self.records.sort(key=lambda r: r.get("t", 0.0))

    def of(self, *evs: str, attempt: str | None = None) -> list[Record]:
        return [
            r for r in self.records
            if r.get("ev") in evs and (attempt is None or str(r.get("attempt")) == attempt)
        ]

    def attempts(self) -> list[str]:
        """Workload attempts that started at least one rank, in launch/restart order."""
        seen = {str(r["attempt"]) for r in self.records if r.get("ev") == "start" and "attempt" in r}
        return sorted(seen, key=attempt_key)

    def all_attempts(self) -> list[str]:
        """Attempts seen from inside (a rank sent ``start``) or outside (the harness saw a worker spawn)."""
        seen = set(self.attempts()) | {str(r["attempt"]) for r in self.of("worker_spawn") if "attempt" in r}
        return sorted(seen, key=attempt_key)

    def by_attempt(self, ev: str) -> dict[str, list[Record]]:
        out: dict[str, list[Record]] = defaultdict(list)
        for r in self.of(ev):
            out[str(r.get("attempt"))].append(r)
        return out

    def max_step(self, attempt: str | None = None, until: float | None = None) -> int:
        steps = [
            int(r["step"]) for r in self.of("step", attempt=attempt)
            if until is None or r.get("t", 0.0) <= until
        ]
        return max(steps, default=0)

    def dataset_size(self) -> int | None:
        for r in self.of("start"):
            if isinstance(r.get("dataset_size"), int):
                return r["dataset_size"]
        return None

    def finals(self) -> list[Record]:
        return self.of("final")

    def final_attempt(self) -> str | None:
        finals = self.finals()
        if not finals:
            return None
        return max((str(r.get("attempt")) for r in finals), key=attempt_key)
