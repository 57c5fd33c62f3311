"""``exactly_once``: over the committed history, every dataset index is consumed once per epoch."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.errors import ChaosError
from chaos.records import Step
from chaos.lineage import Lineage, LineageError, LineageUnproven, Link, rebuild_lineage

EXAMPLES = 5
"""How many indices each finding lists in full; the counts are always complete."""


class ExactlyOnceConfig(CheckConfig):
    max_missing_per_epoch: int = Field(default=0, ge=0)
    """Indices a completed epoch may lack without failing (a drop_last sampler leaves up to one global batch out)."""
    deterministic_order: bool = True
    """The data order is a pure function of (seed, epoch): a rolled-back step's indices must be consumed again once the kept history reaches that step (same world size), and each epoch's consumption must follow the fault-free (golden) run's order. Turn off for samplers that reshuffle the rest of an epoch on resume."""


class ExactlyOnce(Check, kind="exactly_once"):
    """Over the committed history (the lineage of checkpoint loads), every dataset index appears exactly once per epoch."""

    Config = ExactlyOnceConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        h = outcome.history
        size = h.dataset_size()
        if size is None:
            return self.inconclusive("the workload's start events carry no dataset_size, so there is no index set "
                                "to account for (emit it with chaos.sdk start(dataset_size=...))")
        if not h.of("step"):
            return self.failed("the run recorded no training step")
        if any("samples" not in r for r in h.of("step") if r.source != "output"):
            return self.inconclusive("step events carry no 'samples' list, so consumption cannot be traced; emit "
                                     "step(step, epoch=..., samples=<dataset indices of this step>, loss=...)")
        try:
            lineage = rebuild_lineage(h)
        except LineageUnproven as exc:
            return self.inconclusive(f"lineage cannot be proven: {exc}")
        except LineageError as exc:
            return self.failed(f"lineage cannot be rebuilt: {exc}")
        acc = account_samples(lineage, size, self.config, ranks=h.attempt_ranks())
        return self._judge(acc, lineage, self._golden_comparison(outcome, lineage, acc))

    def _golden_comparison(self, outcome: RunOutcome, lineage: Lineage, acc: Accounting) -> GoldenComparison | None:
        if outcome.golden is None or not self.config.deterministic_order or not self._needs_golden(lineage, acc):
            return None
        try:
            summary = outcome.golden()
        except ChaosError as exc:
            return GoldenComparison(notes=[f"no golden comparison: {exc}"])
        return compare_with_golden(acc, summary)

    def _needs_golden(self, lineage: Lineage, acc: Accounting) -> bool:
        """Whether a resume left something only the fault-free order can judge (asking may start the golden run).

        Only a resume can make this run's order differ from the fault-free run of the same workload. A
        resume into an epoch that then completed is judged by completeness alone, unless a tolerated
        gap (max_missing_per_epoch) could hide a skip; one into the unfinished last epoch, or one
        whose resume point was inferred, is not.
        """
        resumes = [link for link in lineage.links if link.after > 0]
        if not resumes:
            return False
        if any(link.segment.inferred for link in resumes) or self.config.max_missing_per_epoch:
            return True
        return acc.partial_epoch is not None and acc.partial_epoch in acc.resumed_into

    def _judge(self, acc: Accounting, lineage: Lineage, golden: GoldenComparison | None) -> CheckResult:
        inferred = [link for link in lineage.links if link.segment.inferred and link.after > 0]
        notes = lineage.notes + (golden.notes if golden else [])
        figures: dict[str, Any] = {
            "lineage": lineage.summary(), "dataset_size": acc.dataset_size,
            "completed_epochs": acc.completed_epochs, "partial_epoch": acc.partial_epoch,
            "partial_epoch_seen": acc.partial_seen,
            "duplicated": _listing(acc.duplicated), "missing": _listing(acc.missing),
            "unexpected": _listing(acc.unexpected),
            "replayed": _listing(acc.replayed), "out_of_range": _listing(acc.out_of_range),
            "duplicate_steps": acc.duplicate_steps[:EXAMPLES], "renumbered_steps": acc.renumbered_steps[:EXAMPLES],
            "missing_steps": acc.missing_steps, "untraced_steps": acc.untraced[:EXAMPLES],
            "golden": golden.figures() if golden else None, "notes": notes,
        }
        # Findings an untraced step cannot explain away.
        certain = []
        if acc.duplicated:
            certain.append(f"{len(acc.duplicated)} duplicated ({_examples(acc.duplicated)})")
        if acc.out_of_range:
            certain.append(f"{len(acc.out_of_range)} outside 0..{acc.dataset_size - 1} "
                           f"({_examples(acc.out_of_range)})")
        if acc.missing_steps:
            last = max(acc.kept_step_numbers)
            certain.append(f"the kept history lacks step(s) {_ranges(acc.missing_steps)} (it must run 1..{last} "
                           f"without a gap: a step counter that jumped, or steps whose events were lost)")
        if acc.duplicate_steps:
            certain.append(f"step(s) recorded twice in the kept history: {', '.join(acc.duplicate_steps[:EXAMPLES])}")
        if acc.renumbered_steps:
            certain.append(f"step(s) at or before their resume point: {', '.join(acc.renumbered_steps[:EXAMPLES])}")
        # Findings that samples an untraced step consumed would explain.
        doubtful = []
        if acc.missing:
            doubtful.append(f"{len(acc.missing)} missing ({_examples(acc.missing)})")
        if acc.unexpected:
            doubtful.append(f"{len(acc.unexpected)} consumed ahead of the fault-free run's order "
                            f"({_examples(acc.unexpected)})")
        replayed = f"{len(acc.replayed)} replayed from rolled-back steps (not a failure)"
        where = f"lineage {lineage.describe()}"
        if notes:
            where += f" ({'; '.join(notes)})"
        untraced = "; ".join(filter(None, [
            acc.silent_ranks and (
                f"rank(s) that reported no step: {_listed(acc.silent_ranks)}: what they consumed is unknown (a "
                f"sampler that does not shard would feed them every index again); every rank emits its own "
                f"step(..., samples=...)"),
            acc.untraced and (
                f"consumption cannot be traced at step(s) {_listed(acc.untraced)} (samples: []; a rank consumes "
                f"nothing only on the short last step of an epoch): emit the dataset indices each rank consumed "
                f"with step(..., samples=...)")]))
        if certain:
            extra = f"; {untraced}" if untraced else ""
            return self.failed(f"{'; '.join(certain + doubtful)}{extra}; {replayed}; {where}", **figures)
        if untraced:
            found = f"; unexplained so far: {'; '.join(doubtful)}" if doubtful else ""
            return self.inconclusive(f"{untraced}{found}; {where}", **figures)
        if doubtful:
            return self.failed(f"{'; '.join(doubtful)}; {replayed}; {where}", **figures)
        if inferred and not (golden and golden.confirmed):
            named = ", ".join(f"attempt {link.segment.attempt} (step {link.after} inferred from its first step)"
                              for link in inferred)
            why = (f"; the golden comparison could not confirm its samples ({'; '.join(golden.notes)})"
                   if golden else "; no golden run's order was compared to confirm its samples")
            return self.inconclusive(f"{named} recorded no ckpt_load, so what it resumed from is a guess; emit "
                                     f"ckpt_load(step, path) on resume{why}; {where}", **figures)
        unjudged = self._unjudged_gaps(acc, golden)
        if unjudged:
            return self.inconclusive(f"{unjudged}; none twice, nothing out of order that could be judged; {where}",
                                     **figures)
        return self.passed(f"each of {acc.dataset_size} indices once in {len(acc.completed_epochs)} completed "
                           f"epoch(s){self._partial(acc, lineage, golden)}; {replayed}; {where}", **figures)

    def _unjudged_gaps(self, acc: Accounting, golden: GoldenComparison | None) -> str:
        """Gaps a resume may have left that only the fault-free order could judge, where none judged them:
        a resume into the epoch the run did not finish, or a completed epoch with tolerated missing
        indices (max_missing_per_epoch) that a resume continued. A skipped batch hides in either."""
        compared = set(golden.compared) if golden else set()
        epochs = sorted(e for e in acc.resumed_into - compared
                        if e == acc.partial_epoch or acc.tolerated.get(e))
        if not epochs:
            return ""
        if not self.config.deterministic_order:
            why = "deterministic_order is off, so no fault-free order applies"
        elif golden is None:
            why = "no fault-free (golden) run was available to compare its order with"
        else:
            why = "; ".join(golden.notes) or "the golden run's order does not cover it"
        parts = []
        for e in epochs:
            if e == acc.partial_epoch:
                parts.append(f"a resume continued epoch {e}, which the run did not finish ({acc.partial_seen} of "
                             f"{acc.dataset_size} indices seen)")
            else:
                parts.append(f"a resume continued epoch {e}, whose {acc.tolerated[e]} missing index(es) "
                             f"max_missing_per_epoch tolerates")
        return (f"{'; '.join(parts)}: a batch skipped on resume leaves a gap there that only the fault-free run's "
                f"order shows, and {why}")

    @staticmethod
    def _partial(acc: Accounting, lineage: Lineage, golden: GoldenComparison | None) -> str:
        if acc.partial_epoch is None:
            return ""
        text = f" + {acc.partial_seen} of {acc.dataset_size} in partial epoch {acc.partial_epoch}"
        if golden and acc.partial_epoch in golden.compared:
            return text + " (none twice, in the fault-free run's order)"
        return text + " (none twice; no resume inside it, so its gaps are the part not yet trained)"


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
        self.untraced: list[str] = []
        self.tolerated: dict[int, int] = {}
        """Completed epochs with missing indices within max_missing_per_epoch, and how many."""
        self.silent_ranks: list[str] = []
        """Ranks of an attempt that reported none of its kept steps (``rank 1 of attempt 0.0 at steps 1..10``)."""


def account_samples(lineage: Lineage, dataset_size: int, config: ExactlyOnceConfig | None = None,
                    ranks: dict[str, set[Any]] | None = None) -> Accounting:
    """Group the kept steps' samples (union over ranks) by epoch and find every irregularity.

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
    for link, r in kept:
        step, epoch = r.step, r.epoch
        key = (link.segment.name, r.rank, step)
        if key in seen_steps:
            acc.duplicate_steps.append(f"{step} (attempt {link.segment.name}, rank {r.rank})")
        seen_steps.add(key)
        kept_by_step[step] = (epoch, int(r.get("world_size", 0)))
        if link.after > 0:
            # Records come in time order: a link's first one is where its resume continued.
            resume_epoch.setdefault(id(link), epoch)
        for index in r.samples or []:
            if not 0 <= index < dataset_size:
                acc.out_of_range.append({"index": index, "epoch": epoch, "steps": [_where(link.segment.name, step)]})
            else:
                seen[epoch][index].append(_where(link.segment.name, step))
    acc.resumed_into = set(resume_epoch.values())
    acc.renumbered_steps = sorted({f"{r.step} (attempt {link.segment.name} resumed from {link.after})"
                                   for link, r in lineage.early_steps()})
    acc.kept_step_numbers = set(kept_by_step)
    acc.missing_steps = sorted(set(range(1, max(kept_by_step, default=0) + 1)) - acc.kept_step_numbers)

    # Epochs are accounted from the lowest one the kept history consumed: a workload may number them
    # from 1 (an epoch before its first is not one it skipped; a skip shows in the steps' own epochs).
    last, first = max(seen, default=0), min(seen, default=0)
    for epoch in range(first, last + 1):
        consumed = seen.get(epoch, {})
        for index, where in sorted(consumed.items()):
            if len(where) > 1:
                acc.duplicated.append({"index": index, "epoch": epoch, "steps": where})
        absent = [i for i in range(dataset_size) if i not in consumed]
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

    missing_keys = {(m["index"], m["epoch"]) for m in acc.missing}
    for segment, r in lineage.rolled_back_steps():
        step, epoch = r.step, r.epoch
        for index in r.samples or []:
            acc.replayed.append({"index": index, "epoch": epoch, "steps": [_where(segment.name, step)]})
            if not config.deterministic_order or epoch in acc.completed_epochs:
                continue
            # A deterministic sampler hands out the same indices at the same step after a resume; one
            # never consumed again although the kept history went past that step was skipped.
            kept_at = kept_by_step.get(step)
            comparable = kept_at == (epoch, int(r.get("world_size", 0)))
            if comparable and index not in seen.get(epoch, {}) and (index, epoch) not in missing_keys:
                missing_keys.add((index, epoch))
                acc.missing.append({"index": index, "epoch": epoch, "steps": [],
                                    "rolled_back_at": _where(segment.name, step)})
    return acc


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


def _listing(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"count": len(items), "first": items[:EXAMPLES]}


def _listed(items: list[str]) -> str:
    more = f", ... ({len(items)} in all)" if len(items) > EXAMPLES else ""
    return ", ".join(items[:EXAMPLES]) + more


def _ranges(numbers: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3..5, 9"``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)


def _examples(items: list[dict[str, Any]]) -> str:
    parts = []
    for item in items[:3]:
        steps = item.get("steps") or []
        if "golden_prefix" in item and not steps:
            origin = f", which the fault-free run consumed within the epoch's first {item['golden_prefix']} step(s)"
        elif "golden_prefix" in item:
            origin = (f" at steps {', '.join(steps)}, which the fault-free run had not reached after the epoch's "
                      f"first {item['golden_prefix']} step(s)")
        elif steps:
            origin = f" at steps {', '.join(steps)}"
        elif "rolled_back_at" in item:
            origin = f" rolled back at {item['rolled_back_at']}, never consumed again"
        else:
            origin = ""
        parts.append(f"index {item['index']} epoch {item['epoch']}{origin}")
    more = ", ..." if len(items) > 3 else ""
    return "e.g. " + "; ".join(parts) + more
