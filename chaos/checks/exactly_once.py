"""``exactly_once``: over the committed history, every dataset index is consumed once per epoch."""

from __future__ import annotations

from typing import Any

from chaos.checks._samples import (EXAMPLES, Accounting, ExactlyOnceConfig, GoldenComparison, _ranges,
                                   account_samples, compare_with_golden)
from chaos.checks.base import Check, CheckResult, RunOutcome
from chaos.errors import ChaosError
from chaos.evidence.lineage import Lineage

__all__ = ["Accounting", "ExactlyOnce", "ExactlyOnceConfig", "GoldenComparison", "account_samples",
           "compare_with_golden"]


class ExactlyOnce(Check, kind="exactly_once"):
    """Over the committed history (the lineage of checkpoint loads), every dataset index appears exactly once per epoch."""

    Config = ExactlyOnceConfig

    def needs_golden(self, outcome: RunOutcome) -> bool:
        prepared = self._account(outcome)
        if isinstance(prepared, CheckResult) or not self.config.deterministic_order:
            return False
        return self._needs_golden(*prepared)

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        prepared = self._account(outcome)
        if isinstance(prepared, CheckResult):
            return prepared
        lineage, acc = prepared
        return self._judge(acc, lineage, self._golden_comparison(outcome, lineage, acc))

    def _account(self, outcome: RunOutcome) -> "CheckResult | tuple[Lineage, Accounting]":
        """The lineage and the accounting of samples over it, or the verdict when there is nothing to account."""
        h = outcome.history
        size = h.dataset_size()
        if size is None:
            return self.inconclusive("the workload's start events carry no dataset_size, so there is no index set "
                                "to account for (emit it with chaos.sdk start(dataset_size=...))")
        if not h.of("step"):
            return self.failed("the run recorded no training step")
        if all(r.source == "output" for r in h.of("step")):
            # A script half-wired to the protocol (start with dataset_size, no step events): its steps were read
            # from the output, which names no sample. Accounting nothing would pass as an epoch not yet trained.
            return self.inconclusive(f"nothing consumed was traced: the run's {len(h.of('step'))} step(s) were only "
                                     f"read from the output (workload.step_regex), which names no dataset index; "
                                     f"emit step(step, epoch=..., samples=<dataset indices of this step>, loss=...)")
        # The field's presence, not its value (Step.samples reads None either way): a step that says
        # ``samples: null`` did report, and is judged as untraced below.
        if any("samples" not in r for r in h.of("step") if r.source != "output"):
            return self.inconclusive("step events carry no 'samples' list, so consumption cannot be traced; emit "
                                     "step(step, epoch=..., samples=<dataset indices of this step>, loss=...)")
        lineage = self.lineage_or_verdict(outcome)
        if isinstance(lineage, CheckResult):
            return lineage
        final = h.final_attempt()
        final_step = max((int(r.step) for r in h.finals() if str(r.attempt) == final and isinstance(r.step, int)),
                         default=None)
        return lineage, account_samples(lineage, size, self.config, ranks=h.attempt_ranks(), final_step=final_step)

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
            "skipped": _listing(acc.skipped),
            "unexpected": _listing(acc.unexpected),
            "replayed": _listing(acc.replayed), "out_of_range": _listing(acc.out_of_range),
            "duplicate_steps": acc.duplicate_steps[:EXAMPLES], "renumbered_steps": acc.renumbered_steps[:EXAMPLES],
            "missing_steps": acc.missing_steps, "untraced_steps": acc.untraced[:EXAMPLES],
            "output_only": acc.output_only,
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
            last = acc.last_step
            certain.append(f"the kept history lacks step(s) {_ranges(acc.missing_steps)} (it must run 1..{last} "
                           f"without a gap: a step counter that jumped, or steps whose events were lost)")
        if acc.skipped:
            steps = sorted({w for d in acc.skipped for w in d["steps"]})
            certain.append(f"{len(acc.skipped)} consumed by step(s) whose update the workload dropped (skipped: "
                           f"{', '.join(steps[:EXAMPLES])}{', ...' if len(steps) > EXAMPLES else ''}) and never "
                           f"trained on ({_examples(acc.skipped)})")
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
                f"with step(..., samples=...)"),
            acc.output_only and (
                f"kept steps seen only in the output (workload.step_regex), with no step event: "
                f"{_listed(acc.output_only)}: what they consumed is unknown; every rank emits its own "
                f"step(..., samples=...)")]))
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


def _listing(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"count": len(items), "first": items[:EXAMPLES]}


def _listed(items: list[str]) -> str:
    more = f", ... ({len(items)} in all)" if len(items) > EXAMPLES else ""
    return ", ".join(items[:EXAMPLES]) + more


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
