"""checkpoint_integrity's evidence, gathered from the run: each checkpoint load (however many ranks reported it),
each corruption the harness made, and the witness's look at a save or a load. Private to the checks
package (the registry imports no module whose name starts with ``_``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.checkpoint.verify import STEP_ENTRY
from chaos.checks.base import RunOutcome
from chaos.checks.base import norm_path as _norm
from chaos.evidence.events import History
from chaos.evidence.harness_records import CkptVerify
from chaos.evidence.records import CkptBegin, CkptCommit, CkptLoad

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".distcp")
"""Names a single checkpoint file has when it is not a step_N entry (torch.save, Lightning, safetensors)."""


@dataclass
class _Corruption:
    path: str
    mode: str
    t: float
    label: str


@dataclass(frozen=True)
class _Load:
    """One checkpoint load, however many ranks reported it."""

    attempt: str
    index: int
    """0: the attempt's resume; 1, 2, ...: in-process reloads."""
    step: int
    path: str
    """As reported; empty for a fresh start or a load reported without a path."""
    t: float
    """When the first rank reported it."""
    times: frozenset[float]
    """When each rank reported it: the witness keys its look to whichever report it saw first."""

    @property
    def key(self) -> str:
        return _norm(self.path)

    @property
    def who(self) -> str:
        reload = f" (in-process reload {self.index})" if self.index else ""
        return f"attempt {self.attempt}{reload}"

    @property
    def name(self) -> str:
        return Path(self.path).name if self.path else f"step {self.step}"


def _corruptions(outcome: RunOutcome) -> list[_Corruption]:
    out = []
    for rec in outcome.faults:
        if rec.kind != "corrupt-checkpoint" or not rec.injected or rec.t_inject is None or not rec.details.get("path"):
            continue
        out.append(_Corruption(_norm(rec.details["path"]), str(rec.details.get("mode", "")), rec.t_inject, rec.label))
    return out


def _loads(records: list[CkptLoad]) -> list[_Load]:
    """Each load once: a rank's k-th ``ckpt_load`` in an attempt is the same load as every other rank's k-th."""
    per_rank: dict[tuple[str, Any], list[CkptLoad]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.t):
        per_rank[(str(r.attempt), r.rank)].append(r)
    # Ranks that disagree on what their k-th load was stay apart: each is judged.
    same: dict[tuple[str, int, int, str], list[CkptLoad]] = defaultdict(list)
    for (attempt, _rank), reports in per_rank.items():
        for k, r in enumerate(reports):
            same[(attempt, k, int(r.step or 0), _norm(r.path))].append(r)
    out = []
    for (attempt, k, step, _key), reports in same.items():
        first = min(reports, key=lambda r: r.t)
        out.append(_Load(attempt, k, step, str(first.path or ""), first.t, frozenset(r.t for r in reports)))
    return sorted(out, key=lambda ld: ld.t)


def _attempt_starts(history: History) -> dict[str, float]:
    """When each attempt was first seen, from inside (its own events) or outside (the harness's records of it)."""
    starts: dict[str, float] = {}
    for r in history.records:
        if r.attempt is not None:
            attempt = str(r.attempt)
            starts[attempt] = min(starts.get(attempt, r.t), r.t)
    return starts


def _look(looks: list[CkptVerify], seen: str, key: str, attempt: str, times: frozenset[float]) -> CkptVerify | None:
    """The witness's ``ckpt_verify`` of this very event (same path and attempt, keyed by the event's time)."""
    found = [r for r in looks if r.seen == seen and _norm(r.path) == key
             and str(r.attempt) == attempt and r.t_event in times]
    return found[-1] if found else None


def _announced(records: list[CkptBegin] | list[CkptCommit], load: _Load) -> bool:
    """Did one of these ``ckpt_begin``/``ckpt_commit`` records, before the load, name what it loaded?"""
    if load.path:
        return any(r.t < load.t and _norm(r.path) == load.key for r in records)
    return any(r.t < load.t and int(r.step or 0) == load.step for r in records)


def _unproven_load(look: CkptVerify | None) -> str:
    if look is None:
        return "and the harness has no look at it from when the load was seen"
    if look.ok is False:
        return f"and the harness found it invalid when the load was seen: {_problems(look)}"
    return f"and the harness could not verify it when the load was seen: {_problems(look)}"


def _problems(look: CkptVerify) -> str:
    return "; ".join(str(p) for p in (look.problems or [])[:3]) or "no detail recorded"


def _unrepaired(c: _Corruption, t: float, commits: list[CkptCommit]) -> bool:
    """Was ``c`` done before ``t``, with no commit of the same path in between to replace the damage?"""
    return c.t < t and not any(_norm(r.path) == c.path and c.t < r.t < t for r in commits)


def _spoiled(commit: CkptCommit, corruptions: list[_Corruption], before: float, commits: list[CkptCommit]) -> bool:
    """Was this commit's checkpoint corrupted by the harness (and not re-committed) before ``before``?"""
    path = _norm(commit.path)
    return any(c.path == path and commit.t < c.t and _unrepaired(c, before, commits) for c in corruptions)


def _step_of_path(path: str) -> int | None:
    match = STEP_ENTRY.match(Path(path).name)
    return int(match.group(1)) if match else None


def _checkpoints_elsewhere(outcome: RunOutcome, root: Path) -> list[str]:
    """Checkpoint-looking files the workload left in its own working directory (workload.cwd), when
    that is not where this check looked: a script that saves ``snapshot.pt`` where it runs."""
    from chaos.runtime.launch import with_run_dir

    cwd = getattr(getattr(outcome.experiment, "workload", None), "cwd", None)
    if not cwd:
        return []
    where = Path(with_run_dir(cwd, outcome.run_dir)).expanduser()
    if not where.is_dir() or where.resolve() == root.resolve():
        return []
    return sorted(str(p) for p in where.iterdir() if p.suffix in CHECKPOINT_SUFFIXES)[:5]
