"""``exactly_once``: over the committed history, every dataset index is consumed once per epoch."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.lineage import Lineage, LineageError, rebuild_lineage

EXAMPLES = 5
"""How many indices each finding lists in full; the counts are always complete."""


class ExactlyOnceConfig(CheckConfig):
    max_missing_per_epoch: int = Field(default=0, ge=0)
    """Indices a completed epoch may lack without failing (a drop_last sampler leaves up to one global batch out)."""
    deterministic_order: bool = True
    """The data order is a pure function of (seed, epoch): a rolled-back step's indices must be consumed again once the kept history reaches that step (same world size). Turn off for samplers that reshuffle the rest of an epoch on resume."""


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
        if any("samples" not in r for r in h.of("step") if r.get("source") != "output"):
            return self.inconclusive("step events carry no 'samples' list, so consumption cannot be traced; emit "
                                     "step(step, epoch=..., samples=<dataset indices of this step>, loss=...)")
        try:
            lineage = rebuild_lineage(h)
        except LineageError as exc:
            return self.failed(f"lineage cannot be rebuilt: {exc}")
        return self._judge(account_samples(lineage, size, self.config), lineage)

    def _judge(self, acc: "Accounting", lineage: Lineage) -> CheckResult:
        figures: dict[str, Any] = {
            "lineage": lineage.summary(), "dataset_size": acc.dataset_size,
            "completed_epochs": acc.completed_epochs, "partial_epoch": acc.partial_epoch,
            "partial_epoch_seen": acc.partial_seen,
            "duplicated": _listing(acc.duplicated), "missing": _listing(acc.missing),
            "replayed": _listing(acc.replayed), "out_of_range": _listing(acc.out_of_range),
            "duplicate_steps": acc.duplicate_steps[:EXAMPLES], "renumbered_steps": acc.renumbered_steps[:EXAMPLES],
            "notes": lineage.notes,
        }
        problems = []
        if acc.duplicated:
            problems.append(f"{len(acc.duplicated)} duplicated ({_examples(acc.duplicated)})")
        if acc.missing:
            problems.append(f"{len(acc.missing)} missing ({_examples(acc.missing)})")
        if acc.out_of_range:
            problems.append(f"{len(acc.out_of_range)} outside 0..{acc.dataset_size - 1} "
                            f"({_examples(acc.out_of_range)})")
        if acc.duplicate_steps:
            problems.append(f"step(s) recorded twice in the kept history: {', '.join(acc.duplicate_steps[:EXAMPLES])}")
        if acc.renumbered_steps:
            problems.append(f"step(s) at or before their resume point: {', '.join(acc.renumbered_steps[:EXAMPLES])}")
        replayed = f"{len(acc.replayed)} replayed from rolled-back steps (not a failure)"
        where = f"lineage {lineage.describe()}"
        if lineage.notes:
            where += f" ({'; '.join(lineage.notes)})"
        if problems:
            return self.failed(f"{'; '.join(problems)}; {replayed}; {where}", **figures)
        partial = (f" + {acc.partial_seen} of {acc.dataset_size} in partial epoch {acc.partial_epoch}"
                   if acc.partial_epoch is not None else "")
        return self.passed(f"each of {acc.dataset_size} indices once in {len(acc.completed_epochs)} completed "
                           f"epoch(s){partial}; {replayed}; {where}", **figures)


class Accounting:
    """What the committed history consumed, and the duplicated, missing and replayed indices."""

    def __init__(self, dataset_size: int) -> None:
        self.dataset_size = dataset_size
        self.completed_epochs: list[int] = []
        self.partial_epoch: int | None = None
        self.partial_seen = 0
        self.duplicated: list[dict[str, Any]] = []
        self.missing: list[dict[str, Any]] = []
        self.replayed: list[dict[str, Any]] = []
        self.out_of_range: list[dict[str, Any]] = []
        self.duplicate_steps: list[str] = []
        self.renumbered_steps: list[str] = []


def account_samples(lineage: Lineage, dataset_size: int, config: ExactlyOnceConfig | None = None) -> Accounting:
    """Group the kept steps' samples (union over ranks) by epoch and find every irregularity."""
    config = config or ExactlyOnceConfig()
    acc = Accounting(dataset_size)
    seen: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    seen_steps: set[tuple[str, Any, int]] = set()
    kept_by_step: dict[int, tuple[int, int]] = {}
    for link, r in lineage.kept_steps():
        step, epoch = int(r["step"]), int(r.get("epoch", 0))
        key = (link.segment.name, r.get("rank"), step)
        if key in seen_steps:
            acc.duplicate_steps.append(f"{step} (attempt {link.segment.name}, rank {r.get('rank')})")
        seen_steps.add(key)
        kept_by_step[step] = (epoch, int(r.get("world_size", 0)))
        for index in r.get("samples") or []:
            if not 0 <= index < dataset_size:
                acc.out_of_range.append({"index": index, "epoch": epoch, "steps": [_where(link.segment.name, step)]})
            else:
                seen[epoch][index].append(_where(link.segment.name, step))
    acc.renumbered_steps = sorted({f"{r['step']} (attempt {link.segment.name} resumed from {link.after})"
                                   for link, r in lineage.early_steps()})

    last = max(seen, default=0)
    for epoch in range(0, last + 1):
        consumed = seen.get(epoch, {})
        for index, where in sorted(consumed.items()):
            if len(where) > 1:
                acc.duplicated.append({"index": index, "epoch": epoch, "steps": where})
        absent = [i for i in range(dataset_size) if i not in consumed]
        if epoch < last or not absent:
            acc.completed_epochs.append(epoch)
            if len(absent) > config.max_missing_per_epoch:
                acc.missing.extend({"index": i, "epoch": epoch, "steps": []} for i in absent)
        else:
            acc.partial_epoch, acc.partial_seen = epoch, len(consumed)

    missing_keys = {(m["index"], m["epoch"]) for m in acc.missing}
    for segment, r in lineage.rolled_back_steps():
        step, epoch = int(r["step"]), int(r.get("epoch", 0))
        for index in r.get("samples") or []:
            acc.replayed.append({"index": index, "epoch": epoch, "steps": [_where(segment.name, step)]})
            if not config.deterministic_order or epoch in acc.completed_epochs:
                continue
            # A deterministic sampler hands out the same indices at the same step after a resume; one
            # never consumed again although the kept history went past that step was skipped.
            kept = kept_by_step.get(step)
            comparable = kept == (epoch, int(r.get("world_size", 0)))
            if comparable and index not in seen.get(epoch, {}) and (index, epoch) not in missing_keys:
                missing_keys.add((index, epoch))
                acc.missing.append({"index": index, "epoch": epoch, "steps": [],
                                    "rolled_back_at": _where(segment.name, step)})
    return acc


def _where(attempt: str, step: int) -> str:
    return f"{attempt}:{step}"


def _listing(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"count": len(items), "first": items[:EXAMPLES]}


def _examples(items: list[dict[str, Any]]) -> str:
    parts = []
    for item in items[:3]:
        steps = item.get("steps") or []
        origin = (f" at steps {', '.join(steps)}" if steps else
                  f" rolled back at {item['rolled_back_at']}, never consumed again" if "rolled_back_at" in item
                  else "")
        parts.append(f"index {item['index']} epoch {item['epoch']}{origin}")
    more = ", ..." if len(items) > 3 else ""
    return "e.g. " + "; ".join(parts) + more
