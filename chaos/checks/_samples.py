"""exactly_once's settings and accounting: every dataset index the kept history consumed, per epoch and rank,
and the comparison with the fault-free run's order. Private to the checks package (the registry imports no
module whose name starts with ``_``); the check itself is chaos.checks.exactly_once."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from chaos.checks.base import CheckConfig
from chaos.evidence.lineage import Lineage, Link
from chaos.evidence.records import Step

EXAMPLES = 5
"""How many indices each finding lists in full; the counts are always complete."""


class ExactlyOnceConfig(CheckConfig):
    max_missing_per_epoch: int = Field(default=0, ge=0)
    """Indices a completed epoch may lack without failing (a drop_last sampler leaves up to one global batch out)."""
    deterministic_order: bool = True
    """The data order is a pure function of (seed, epoch): a rolled-back step's indices must be consumed again once the kept history reaches that step (same world size), and each epoch's consumption must follow the fault-free (golden) run's order. Turn off for samplers that reshuffle the rest of an epoch on resume."""


class Accounting:
    """What the committed history consumed, and the duplicated, missing and replayed indices."""

    def __init__(self, dataset_size: int) -> None:
        self.dataset_size = dataset_size
        self.completed_epochs: list[int] = []
        self.partial_epoch: int | None = None
        self.partial_seen = 0
        self.consumed: dict[int, dict[int, list[str]]] = {}
        """Per epoch, each consumed index and the kept steps (attempt:step) that consumed it."""
        self.duplicated: list[dict[str, Any]] = []
        self.missing: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.replayed: list[dict[str, Any]] = []
        self.out_of_range: list[dict[str, Any]] = []
        self.duplicate_steps: list[str] = []
        self.renumbered_steps: list[str] = []
        self.resumed_into: set[int] = set()
        """Epochs that a resume (a lineage link from a step > 0) continued."""
        self.kept_step_numbers: set[int] = set()
        self.missing_steps: list[int] = []
        self.last_step = 0
        """The step the kept history must reach: its highest, or the final attempt's final step if higher."""
        self.untraced: list[str] = []
        self.tolerated: dict[int, int] = {}
        """Completed epochs with missing indices within max_missing_per_epoch, and how many."""
        self.skipped: list[dict[str, Any]] = []
        """Indices of kept steps whose update was dropped (``skipped``): consumed, never trained on."""
        self.silent_ranks: list[str] = []
        """Ranks of an attempt that reported none of its kept steps (``rank 1 of attempt 0.0 at steps 1..10``)."""
        self.output_only: list[str] = []
        """Kept links whose steps only the output showed (step_regex), with no step event of theirs kept
        (``attempt 0.1 at step(s) 7..10``): what they consumed is unknown."""


def account_samples(lineage: Lineage, dataset_size: int, config: ExactlyOnceConfig | None = None,
                    ranks: dict[str, set[Any]] | None = None, final_step: int | None = None) -> Accounting:
    """Group the kept steps' samples (union over ranks) by epoch and find every irregularity.

    ``final_step``: the step the final attempt's ``final`` events name (the kept history must reach it).
    ``ranks``: each attempt's ranks (``History.attempt_ranks``). A rank that reported none of a kept step is
    named: the union over the ranks that did report says nothing of what it consumed.
    """
    config = config or ExactlyOnceConfig()
    acc = Accounting(dataset_size)
    seen: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    seen_steps: set[tuple[str, Any, int]] = set()
    kept_by_step: dict[int, tuple[int, int]] = {}
    resume_epoch: dict[int, int] = {}
    # Steps the harness read from the output (step_regex) say nothing about samples.
    kept = [(link, r) for link, r in lineage.kept_steps() if r.source != "output"]
    acc.output_only, shown = _output_only(lineage, kept)
    for link, r in kept:
        step, epoch = r.step, r.epoch
        key = (link.segment.name, r.rank, step)
        if key in seen_steps:
            acc.duplicate_steps.append(f"{step} (attempt {link.segment.name}, rank {r.rank})")
        seen_steps.add(key)
        kept_by_step[step] = (epoch, int(r.world_size or 0))
        if link.after > 0:
            # Records come in time order: a link's first one is where its resume continued.
            resume_epoch.setdefault(id(link), epoch)
        for index in r.samples or []:
            if not 0 <= index < dataset_size:
                acc.out_of_range.append({"index": index, "epoch": epoch, "steps": [_where(link.segment.name, step)]})
            elif r.skipped:
                # Consumed and thrown away: not used, and not to be consumed again either (the cursor moved on).
                acc.skipped.append({"index": index, "epoch": epoch, "steps": [_where(link.segment.name, step)]})
            else:
                seen[epoch][index].append(_where(link.segment.name, step))
    acc.resumed_into = set(resume_epoch.values())
    acc.renumbered_steps = sorted({f"{r.step} (attempt {link.segment.name} resumed from {link.after})"
                                   for link, r in lineage.early_steps()})
    acc.kept_step_numbers = set(kept_by_step)
    # Up to the step the run says it ended at, not only the highest kept one: the records of the last steps
    # lost whole (a partial epoch's, which no epoch accounting would miss) are missing steps too.
    acc.last_step = max(max(kept_by_step, default=0), final_step or 0)
    # A step only the output shows (a link with no step event) ran: untraced (output_only), not lost.
    acc.missing_steps = sorted(set(range(1, acc.last_step + 1)) - acc.kept_step_numbers - shown)

    # Epochs are accounted from the lowest one the kept history consumed: a workload may number them
    # from 1 (an epoch before its first is not one it skipped; a skip shows in the steps' own epochs).
    last, first = max(seen, default=0), min(seen, default=0)
    for epoch in range(first, last + 1):
        consumed = seen.get(epoch, {})
        for index, where in sorted(consumed.items()):
            if len(where) > 1:
                acc.duplicated.append({"index": index, "epoch": epoch, "steps": where})
        dropped = {d["index"] for d in acc.skipped if d["epoch"] == epoch}
        absent = [i for i in range(dataset_size) if i not in consumed and i not in dropped]
        if epoch < last or not absent:
            acc.completed_epochs.append(epoch)
            if len(absent) > config.max_missing_per_epoch:
                acc.missing.extend({"index": i, "epoch": epoch, "steps": []} for i in absent)
            elif absent:
                acc.tolerated[epoch] = len(absent)
        else:
            acc.partial_epoch, acc.partial_seen = epoch, len(consumed)
    acc.consumed = {epoch: dict(by_index) for epoch, by_index in seen.items()}
    acc.untraced = _untraced_steps(kept, acc.completed_epochs)
    acc.silent_ranks = _silent_ranks(kept, ranks or {})

    missing_keys = {(m["index"], m["epoch"]) for m in acc.missing} | {(d["index"], d["epoch"]) for d in acc.skipped}
    for segment, r in lineage.rolled_back_steps():
        step, epoch = r.step, r.epoch
        for index in r.samples or []:
            acc.replayed.append({"index": index, "epoch": epoch, "steps": [_where(segment.name, step)]})
            if not config.deterministic_order or epoch in acc.completed_epochs:
                continue
            # A deterministic sampler hands out the same indices at the same step after a resume; one
            # never consumed again although the kept history went past that step was skipped.
            kept_at = kept_by_step.get(step)
            comparable = kept_at == (epoch, int(r.world_size or 0))
            if comparable and index not in seen.get(epoch, {}) and (index, epoch) not in missing_keys:
                missing_keys.add((index, epoch))
                acc.missing.append({"index": index, "epoch": epoch, "steps": [],
                                    "rolled_back_at": _where(segment.name, step)})
    return acc


def _output_only(lineage: Lineage, kept: list[tuple[Link, Step]]) -> tuple[list[str], set[int]]:
    """Kept links that trained (the output shows kept steps of theirs) but kept no step event, and those steps: a
    script whose restart stopped reporting steps, or never did. Their consumption is not in the accounting at all,
    and no gap it leaves may pass for the part of an epoch not yet trained."""
    traced = {id(link) for link, _ in kept}
    seen: dict[int, tuple[Link, set[int]]] = {}
    for link, r in lineage.kept_steps():
        if r.source == "output" and id(link) not in traced:
            seen.setdefault(id(link), (link, set()))[1].add(r.step)
    return ([f"attempt {link.segment.name} at step(s) {_ranges(sorted(steps))}" for link, steps in seen.values()],
            {step for _, steps in seen.values() for step in steps})


def _silent_ranks(kept: list[tuple[Link, Step]], ranks: dict[str, set[Any]]) -> list[str]:
    """Per kept link, the ranks of its attempt that reported none of its kept steps, or only some of them."""
    reported: dict[str, dict[int, set[Any]]] = defaultdict(lambda: defaultdict(set))
    attempt_of: dict[str, str] = {}
    for link, r in kept:
        reported[link.segment.name][r.step].add(r.rank)
        attempt_of[link.segment.name] = link.segment.attempt
    out = []
    for name, by_step in reported.items():
        expected = ranks.get(attempt_of[name], set())
        for rank in sorted(expected - set().union(*by_step.values()), key=str):
            out.append(f"rank {rank} of attempt {name} (none of its {len(by_step)} kept step(s))")
        for rank in sorted(expected & set().union(*by_step.values()), key=str):
            lacking = sorted(step for step, who in by_step.items() if rank not in who)
            if lacking:
                out.append(f"rank {rank} of attempt {name} at step(s) {_ranges(lacking)}")
    return out


def _untraced_steps(kept: list[tuple[Link, Step]], completed_epochs: list[int]) -> list[str]:
    """Kept steps whose ``samples: []`` hides what was consumed.

    A global-cursor sampler leaves a rank empty-handed only on the short last step of an epoch, once
    the others took what was left; anywhere else an empty list is a step whose consumption went unreported.
    """
    by_step: dict[int, dict[Any, list[Any]]] = defaultdict(dict)
    epoch_of: dict[int, int] = {}
    for _, r in kept:
        by_step[r.step].setdefault(r.rank, []).extend(r.samples or [])
        epoch_of[r.step] = r.epoch
    last_of_epoch: dict[int, int] = {}
    for step, epoch in epoch_of.items():
        last_of_epoch[epoch] = max(step, last_of_epoch.get(epoch, step))
    out = []
    for step in sorted(by_step):
        ranks = by_step[step]
        empty = sorted((rank for rank, samples in ranks.items() if not samples), key=str)
        if not empty:
            continue
        epoch = epoch_of[step]
        if len(empty) == len(ranks):
            out.append(f"{step} (every rank)")
        elif not (epoch in completed_epochs and last_of_epoch[epoch] == step):
            out.append(f"{step} (rank {', '.join(str(rank) for rank in empty)})")
    return out


@dataclass
class GoldenComparison:
    """Each kept epoch's consumption against the fault-free run's step-by-step order."""

    compared: list[int] = field(default_factory=list)
    """Epochs judged in full against the golden order."""
    unjudged: list[int] = field(default_factory=list)
    """Epochs (or their tails) the golden run cannot judge: it never consumed that far."""
    found: int = 0
    notes: list[str] = field(default_factory=list)
    world_size: int | None = None
    run_dir: str | None = None

    @property
    def confirmed(self) -> bool:
        """Every kept epoch matched the golden order, so the samples are proven without this run's loads."""
        return bool(self.compared) and not self.unjudged and not self.found

    def figures(self) -> dict[str, Any]:
        return {"compared_epochs": self.compared, "unjudged_epochs": self.unjudged, "findings": self.found,
                "world_size": self.world_size, "run_dir": self.run_dir}


def compare_with_golden(acc: Accounting, summary: dict[str, Any]) -> GoldenComparison:
    """Per epoch, the run's consumed set must lie between the golden step-prefixes around its size.

    With P_lo the largest golden prefix (union of its first k steps) no bigger than what the run
    consumed, and P_hi the smallest no smaller: P_lo ⊆ consumed ⊆ P_hi. A global order makes that
    hold under any world size; a skipped batch leaves indices of P_lo out, and a cursor restarted
    at the wrong offset consumes indices beyond P_hi. Findings go into ``acc`` as missing and unexpected.
    """
    cmp = GoldenComparison(world_size=summary.get("world_size"), run_dir=summary.get("run_dir"))
    epochs = summary.get("epoch_samples")
    if epochs is None:
        cmp.notes.append("the golden run's steps did not all report their samples, so its order is unknown")
        return cmp
    if summary.get("dataset_size") not in (None, acc.dataset_size):
        cmp.notes.append(f"the golden run's dataset_size is {summary['dataset_size']}, not {acc.dataset_size}")
        return cmp
    known = {(m["index"], m["epoch"]) for m in acc.missing}
    for epoch in sorted(acc.consumed):
        consumed = acc.consumed[epoch]
        steps = epochs.get(str(epoch))
        if steps is None:
            cmp.unjudged.append(epoch)
            cmp.notes.append(f"the golden run never reached epoch {epoch}, so it cannot judge it")
            continue
        sizes, union = [0], set()
        for batch in steps:
            union.update(batch)
            sizes.append(len(union))
        count = len(consumed)
        lo = max(k for k, n in enumerate(sizes) if n <= count)
        for index in sorted(set().union(*steps[:lo]) - consumed.keys()):
            cmp.found += 1
            if (index, epoch) not in known:
                acc.missing.append({"index": index, "epoch": epoch, "steps": [], "golden_prefix": lo})
        hi = next((k for k, n in enumerate(sizes) if n >= count), None)
        if hi is None:
            cmp.unjudged.append(epoch)
            cmp.notes.append(f"this run consumed {count} indices of epoch {epoch}, the golden run only {sizes[-1]}: "
                             f"it cannot judge past its own end")
            continue
        for index in sorted(consumed.keys() - set().union(*steps[:hi])):
            cmp.found += 1
            acc.unexpected.append({"index": index, "epoch": epoch, "steps": consumed[index], "golden_prefix": hi})
        cmp.compared.append(epoch)
    return cmp


def _where(attempt: str, step: int) -> str:
    return f"{attempt}:{step}"


def _ranges(numbers: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3..5, 9"``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)
