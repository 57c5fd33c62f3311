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


_NUMBER = (int, float)
_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    # What the checks read of each workload event, and the type it must have (DESIGN.md's protocol).
    "start": {},
    "step": {"step": (int,), "epoch": (int,)},
    "ckpt_begin": {"step": (int,), "path": (str,)},
    "ckpt_commit": {"step": (int,), "path": (str,)},
    "ckpt_error": {"step": (int,)},
    "ckpt_load": {"step": (int,)},
    "ckpt_reject": {"path": (str,)},
    "final": {"step": (int,)},
}
_COMMON: dict[str, tuple[type, ...]] = {"t": _NUMBER, "attempt": (str,), "rank": (int,)}


def record_problem(record: Record) -> str | None:
    """Why a workload record breaks the event protocol (a missing or mistyped field), or None.

    A malformed record is named and left out, never read with a default: a ``step`` without an
    integer step number would otherwise count as step 0 and quietly change a verdict.
    """
    ev = record.get("ev")
    if not isinstance(ev, str):
        return "no 'ev' name"
    required = {**_COMMON, **_FIELDS.get(ev, {})}
    for name, types in required.items():
        value = record.get(name)
        if not isinstance(value, types) or isinstance(value, bool):
            kinds = " or ".join(t.__name__ for t in types)
            got = "missing" if name not in record else f"got {value!r}"[:60]
            return f"{ev} event: '{name}' must be {kinds}, {got}"
    samples = record.get("samples")
    if ev == "step" and samples is not None and (
            not isinstance(samples, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in samples)):
        return "step event: 'samples' must be a list of dataset indices (integers)"
    return None


class EventTail:
    """Follows every ``*.jsonl`` file in a directory, returning only complete new lines.

    A line still being written (no trailing newline yet) is kept back until it is whole, so a
    reader racing a writer never sees half a record.
    """

    def __init__(self, directory: str | os.PathLike[str], *, validate: bool = False) -> None:
        self.directory = Path(directory)
        self.validate = validate
        """Hold workload records to the protocol (``record_problem``); the harness's own need no check."""
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self.bad_lines: list[str] = []
        """``file: problem: line`` for every line left out: not JSON, or breaking the protocol."""

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
            text = line[:160].decode(errors="replace")
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                self.bad_lines.append(f"{path.name}: not JSON: {text}")
                continue
            if not isinstance(record, dict) or "ev" not in record:
                continue
            problem = record_problem(record) if self.validate else None
            if problem:
                self.bad_lines.append(f"{path.name}: {problem}: {text}")
                continue
            yield record


def read_records(paths: Iterable[str | os.PathLike[str]], *, validate: bool = False,
                 bad_lines: list[str] | None = None) -> list[Record]:
    """Every well-formed record of the given files or directories, merged by ``t``; what was left out goes to ``bad_lines``."""
    records: list[Record] = []
    for p in paths:
        p = Path(p)
        tail = EventTail(p if p.is_dir() else p.parent, validate=validate)
        if p.is_dir():
            records.extend(tail.poll())
        elif p.exists():
            records.extend(tail._read_new(p))
        if bad_lines is not None:
            bad_lines.extend(tail.bad_lines)
    return sorted(records, key=lambda r: r.get("t", 0.0))


def _t(r: Record) -> float:
    return r.get("t", 0.0)


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
    malformed: list[str] = field(default_factory=list)
    """Workload lines left out of the history because they broke the protocol (see ``record_problem``)."""
    relabel: dict[tuple[str, int], str] = field(default_factory=dict)
    """(host, pid) -> the attempt that process really belonged to, where it reported another (see ``align_attempts``)."""

    def __post_init__(self) -> None:
        self.records.sort(key=lambda r: r.get("t", 0.0))

    @classmethod
    def from_run_dir(cls, run_dir: str | os.PathLike[str]) -> "History":
        run_dir = Path(run_dir)
        malformed: list[str] = []
        records = read_records([run_dir / "events"], validate=True, bad_lines=malformed)
        records += read_records([run_dir / HARNESS_LOG])
        history = cls(records, malformed)
        history.align_attempts()
        return history

    def add(self, records: Iterable[Record]) -> None:
        new = list(records)
        if not new:
            return
        if self.relabel:
            for r in new:
                self._relabel(r)
        new.sort(key=_t)
        # Polled every 0.1 s for the whole run: new records mostly come after the old ones, and
        # then need no sort of everything.
        late = bool(self.records) and _t(new[0]) < _t(self.records[-1])
        self.records.extend(new)
        if late:
            self.records.sort(key=_t)

    def _relabel(self, r: Record) -> None:
        if r.get("source") == "harness":
            return
        label = self.relabel.get((str(r.get("host")), r.get("pid")))  # type: ignore[arg-type]
        if label is not None and r.get("attempt") != label:
            r.setdefault("attempt_reported", r.get("attempt"))
            r["attempt"] = label

    def set_attempt(self, host: str, pid: int, attempt: str) -> None:
        """Record that process ``pid`` on ``host`` belonged to ``attempt``, and relabel what it already wrote."""
        if self.relabel.get((host, pid)) == attempt:
            return
        self.relabel[(host, pid)] = attempt
        for r in self.records:
            if r.get("pid") == pid and str(r.get("host")) == host:
                self._relabel(r)

    def align_attempts(self) -> None:
        """One attempt id per round of workers, as the harness saw the rounds.

        A worker's attempt is ``launch.TORCHELASTIC_RESTART_COUNT``, but on a multi-node job only the
        agent whose worker failed counts a restart: a peer agent that merely re-rendezvouses keeps its
        count, so one round of ranks reports two attempts, and the peer's new processes reuse the
        previous round's id. The harness numbers the rounds it sees (a round starts when a worker
        appears while none of the previous round is alive: torchrun stops every worker of an agent
        before that agent joins the next rendezvous) and logs it on ``worker_spawn`` as
        ``generation``; every worker of a round gets the highest attempt any of them reported.
        """
        spawns = [r for r in self.of("worker_spawn") if isinstance(r.get("generation"), int)
                  and isinstance(r.get("worker_pid"), int) and isinstance(r.get("attempt"), str)]
        labels: dict[int, str] = {}
        for r in spawns:
            g = r["generation"]
            if g not in labels or attempt_key(r["attempt"]) > attempt_key(labels[g]):
                labels[g] = r["attempt"]
        for r in spawns:
            label = labels[r["generation"]]
            if r["attempt"] != label:
                self.set_attempt(str(r.get("node")), r["worker_pid"], label)
                r.setdefault("attempt_reported", r["attempt"])
                r["attempt"] = label
        for r in self.of("worker_exit"):
            label = self.relabel.get((str(r.get("node")), r.get("worker_pid")))  # type: ignore[arg-type]
            if label is not None and r.get("attempt") != label:
                r.setdefault("attempt_reported", r.get("attempt"))
                r["attempt"] = label

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
