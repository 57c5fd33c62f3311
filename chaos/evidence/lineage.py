"""The lineage of a run: which checkpoints the surviving training history was resumed through."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos.evidence.events import History, Record, attempt_key
from chaos.evidence.harness_records import CkptVerify
from chaos.evidence.records import CkptBegin, CkptCommit, CkptLoad, Step


class LineageError(Exception):
    """The lineage cannot be rebuilt; the message is the finding (e.g. a resume from an uncommitted step)."""


class LineageUnproven(LineageError):
    """The lineage hangs on a link nothing proves (an unannounced save nobody verified): evidence is missing."""


@dataclass
class Segment:
    """A stretch of one attempt between two checkpoint loads (or from its start to its end).

    A workload that reloads a checkpoint in-process (a rollback after a NaN loss) starts a new
    segment without starting a new attempt.
    """

    attempt: str
    index: int
    """0 for the attempt's first load; 1, 2, ... for later in-process reloads."""
    resumed_from: int
    """The step it loaded (0: a fresh start)."""
    load_path: str | None
    load_t: float
    inferred: bool
    """No ``ckpt_load`` was recorded: ``resumed_from`` is the step before its first step."""
    steps: list[Step] = field(default_factory=list)
    commits: list[CkptCommit] = field(default_factory=list)
    rank_load_t: dict[Any, float] = field(default_factory=dict)
    """When each rank that logged this segment's load did so (its own records after that are this segment's)."""

    @property
    def name(self) -> str:
        return self.attempt if self.index == 0 else f"{self.attempt}#{self.index}"

    @property
    def max_step(self) -> int:
        return max((r.step for r in self.steps), default=self.resumed_from)


@dataclass
class Link:
    """One segment of the lineage and the range of its steps that were kept: (after, upto]."""

    segment: Segment
    after: int
    upto: int | None
    """The step the next link resumed from; None for the head (kept to its end)."""
    commit: CkptCommit | CkptBegin | None = None
    """The ``ckpt_commit`` the next link loaded (or the ``ckpt_begin`` of a verified, unannounced save)."""

    def keeps(self, step: int) -> bool:
        return step > self.after and (self.upto is None or step <= self.upto)

    def describe(self) -> str:
        end = "end" if self.upto is None else str(self.upto)
        return f"{self.segment.name}({self.after}..{end}]"


@dataclass
class Lineage:
    """The chain of segments from step 0 to the head, oldest first, and every segment of the run.

    The final attempt resumed from checkpoint step L, which an earlier attempt committed; that
    attempt resumed from its own L', and so on back to step 0. The steps each of those attempts ran
    in its kept range (L', L] form the committed history; every other step was rolled back.
    """

    links: list[Link]
    segments: list[Segment]
    notes: list[str] = field(default_factory=list)
    """Things worth knowing that are not failures (an inferred resume point, a path mismatch)."""

    def kept_steps(self) -> list[tuple[Link, Step]]:
        """Step records of the committed history, oldest link first, each with its link."""
        return [(link, r) for link in self.links for r in link.segment.steps if link.keeps(r.step)]

    def rolled_back_steps(self) -> list[tuple[Segment, Step]]:
        """Step records that the lineage discarded: past a link's range, or in a segment not in it."""
        kept_ids = {id(r) for _, r in self.kept_steps()}
        return [(s, r) for s in self.segments for r in s.steps if id(r) not in kept_ids]

    def early_steps(self) -> list[tuple[Link, Step]]:
        """Steps a lineage segment recorded at or before the step it resumed from (numbering went back)."""
        return [(link, r) for link in self.links for r in link.segment.steps if r.step <= link.after]

    def describe(self) -> str:
        return " -> ".join(link.describe() for link in self.links)

    def summary(self) -> list[dict[str, Any]]:
        return [{"segment": link.segment.name, "resumed_from": link.after, "kept_until": link.upto,
                 "inferred": link.segment.inferred} for link in self.links]


def split_segments(history: History) -> list[Segment]:
    """Every attempt's segments, each with its step and commit records (assigned per rank by time)."""
    loads = history.by_attempt("ckpt_load")
    steps = history.by_attempt("step")
    commits = history.by_attempt("ckpt_commit")
    attempts = sorted(set(loads) | set(steps) | set(commits) | set(history.attempts()), key=attempt_key)
    out: list[Segment] = []
    for attempt in attempts:
        out.extend(_segments_of(attempt, loads.get(attempt, []), steps.get(attempt, []), commits.get(attempt, [])))
    return out


def _segments_of(attempt: str, loads: list[CkptLoad], steps: list[Step], commits: list[CkptCommit]) -> list[Segment]:
    per_rank: dict[Any, list[CkptLoad]] = defaultdict(list)
    for r in sorted(loads, key=lambda r: r.t):
        per_rank[r.rank].append(r)
    count = max((len(v) for v in per_rank.values()), default=0)
    if count == 0:
        first = min((r.step for r in steps), default=1)
        t0 = min((r.t for r in [*steps, *commits]), default=0.0)
        seg = Segment(attempt, 0, max(0, first - 1), None, t0, inferred=True)
        seg.steps, seg.commits = list(steps), list(commits)
        return [seg]
    segments = []
    for k in range(count):
        kth = {rank: rl[k] for rank, rl in per_rank.items() if len(rl) > k}
        found = {rank: r.step or 0 for rank, r in kth.items()}
        if len(set(found.values())) > 1:
            listing = ", ".join(f"rank {rank}: step {s}" for rank, s in sorted(found.items(), key=lambda x: str(x[0])))
            raise LineageError(f"the ranks of attempt {attempt} resumed from different checkpoints ({listing})")
        first_load = min(kth.values(), key=lambda r: r.t)
        segments.append(Segment(attempt, k, next(iter(found.values())), first_load.path, first_load.t,
                                inferred=False, rank_load_t={rank: r.t for rank, r in kth.items()}))
    for r in steps:
        segment_at(segments, r.rank, r.t).steps.append(r)
    for r in commits:
        segment_at(segments, r.rank, r.t).commits.append(r)
    return segments


def segment_at(segments: list[Segment], rank: Any, t: float) -> Segment:
    """Which of one attempt's segments (oldest first) a record of ``rank`` at time ``t`` belongs to.

    A rank's own loads split its records; a rank that logged no load follows the earliest one."""
    own = [s.rank_load_t[rank] for s in segments if rank in s.rank_load_t]
    bounds = own or [s.load_t for s in segments]
    k = sum(1 for b in bounds[1:] if t >= b)
    return segments[min(k, len(segments) - 1)]


def rebuild_lineage(history: History, head_attempt: str | None = None) -> Lineage:
    """Follow the checkpoint loads back from the head to step 0; raises LineageError with the finding.

    The head is the last segment of ``head_attempt`` (default: the attempt with ``final`` events,
    else the last attempt that recorded a step).
    """
    segments = split_segments(history)
    if not segments:
        raise LineageError("the run recorded no training steps and no checkpoint loads")
    begins = history.of("ckpt_begin")
    verifies = history.harness(CkptVerify)
    notes: list[str] = []
    if head_attempt is None:
        head_attempt = history.final_attempt()
    if head_attempt is None:
        stepped = [s.attempt for s in segments if s.steps]
        if not stepped:
            raise LineageError("no attempt recorded a training step")
        head_attempt = max(stepped, key=attempt_key)
        notes.append(f"no attempt wrote a final event: judged up to the last step of attempt {head_attempt}")
    own = [s for s in segments if s.attempt == head_attempt]
    if not own:
        raise LineageError(f"attempt {head_attempt} recorded neither steps nor checkpoint loads")
    lineage = Lineage(links=[], segments=segments, notes=notes)
    current = own[-1]
    upto: int | None = None
    commit: Record | None = None
    while True:
        lineage.links.insert(0, Link(current, current.resumed_from, upto, commit))
        if current.inferred and current.resumed_from > 0:
            lineage.notes.append(f"attempt {current.attempt} recorded no ckpt_load; its first step "
                                 f"{current.resumed_from + 1} implies it resumed from step {current.resumed_from}")
        if current.resumed_from == 0:
            return lineage
        commit, parent = _find_commit(segments, current, lineage, begins, verifies)
        upto = current.resumed_from
        if parent.resumed_from >= upto:
            raise LineageError(f"attempt {current.name} resumed from step {upto}, committed by attempt "
                               f"{parent.name} which had itself resumed from the later step {parent.resumed_from}")
        current = parent


def _find_commit(segments: list[Segment], child: Segment, lineage: Lineage,
                 begins: list[CkptBegin], verifies: list[CkptVerify]) -> tuple[CkptCommit | CkptBegin, Segment]:
    """The latest commit of ``child.resumed_from`` before ``child`` loaded it, preferring the same path."""
    step = child.resumed_from
    candidates = [(r, s) for s in segments for r in s.commits
                  if r.step == step and r.t < child.load_t]
    if not candidates:
        unannounced = _unannounced_commit(segments, child, begins)
        if unannounced is not None:
            begin, parent = unannounced
            _require_verified_load(child, begin, parent, verifies)
            lineage.notes.append(
                f"step {step} loaded by attempt {child.name} was never announced with ckpt_commit: attempt "
                f"{parent.name} began saving it and died between the commit and the event; taken as its commit "
                f"(the harness verified the loaded checkpoint)")
            return begin, parent
        later = [s.name for s in segments for r in s.commits if r.step == step]
        why = (f"; attempt {later[0]} committed it only afterwards" if later else "")
        raise LineageError(f"attempt {child.name} resumed from step {step} which no attempt committed{why}")
    same_path = [(r, s) for r, s in candidates if _same_path(r.path, child.load_path)]
    if not same_path:
        lineage.notes.append(f"attempt {child.name} loaded {child.load_path} for step {step}, "
                             f"which was committed as {candidates[-1][0].path}")
    return max(same_path or candidates, key=lambda c: c[0].t)


def _same_path(committed: Any, loaded: Any) -> bool:
    if committed is None or loaded is None:
        return True
    return os.path.normpath(str(committed)) == os.path.normpath(str(loaded))


def _unannounced_commit(segments: list[Segment], child: Segment,
                        begins: list[CkptBegin]) -> tuple[CkptBegin, Segment] | None:
    """A save of the loaded step that began (``ckpt_begin``) in a segment that had reached that step.

    A kill that lands after a checkpoint became durable but before its ``ckpt_commit`` line was
    written leaves a valid checkpoint nobody announced; the resume that loads it is correct, and
    the segment that was saving it is its author, once ``_require_verified_load`` has the proof.
    """
    step = child.resumed_from
    for begin in sorted(begins, key=lambda r: -r.t):
        if begin.step != step or begin.t >= child.load_t or not _same_path(begin.path, child.load_path):
            continue
        for seg in segments:
            if (seg.attempt == str(begin.attempt) and seg is not child
                    and seg.resumed_from < step <= seg.max_step and seg.load_t <= begin.t):
                return begin, seg
    return None


def _require_verified_load(child: Segment, begin: CkptBegin, parent: Segment, verifies: list[CkptVerify]) -> None:
    """A bare ``ckpt_begin`` stands for a commit only if the harness found the loaded checkpoint whole.

    A save killed halfway leaves the same ``ckpt_begin`` as one killed after it became durable;
    only the witness's ``ckpt_verify`` of the load (chaos/evidence/witness.py) tells the two apart.
    """
    step = child.resumed_from
    # The harness's own records are not held to the protocol: a step or path of another type reads None (no look).
    looks = [r for r in verifies if r.seen == "ckpt_load" and str(r.attempt) == child.attempt
             and r.step == step and child.load_path is not None and r.path is not None
             and _same_path(r.path, child.load_path)]
    if any(r.ok is True for r in looks):
        return
    head = (f"attempt {child.name} resumed from step {step}, which attempt {parent.name} began saving "
            f"(ckpt_begin {begin.path}) but never announced with ckpt_commit, and ")
    tail = ": an unannounced save is not taken as a commit without that proof"
    problems = "; ".join(str(p) for r in looks for p in r.problems or []) or "no details"
    if any(r.ok is False for r in looks):
        raise LineageError(f"{head}the harness found it broken when it was loaded ({problems}){tail}")
    if child.load_path is None:
        why = ("its ckpt_load names no path, so the harness could not verify what it loaded; "
               "emit ckpt_load(step, path)")
    elif not looks:
        why = (f"the harness recorded no verification (ckpt_verify) of {child.load_path} as loaded by "
               f"attempt {child.attempt}; run it under the chaos runner, whose witness verifies each load it sees")
    else:
        why = f"the harness could not verify it when it was loaded ({problems})"
    raise LineageUnproven(head + why + tail)
