"""``no_corrupt_commit``: every checkpoint the job committed holds finite numbers, as the harness itself read them.

A fault inside the step (a NaN, an Inf) leaves a checkpoint's bytes intact and its weights poisoned;
a resume from it carries the poison on. The witness (chaos.evidence.witness) loads each committed
checkpoint the moment its ``ckpt_commit`` is seen, before retention can take it away, and scans every
tensor (weights, optimizer state) for non-finite values (chaos.checkpoint.values). This check needs
that scan for every committed checkpoint: one it has no scan of, or whose files it could not load, is
evidence missing, never a pass. The scan names every file it did not read (a foreign format, a DCP
state that would not load) as ``unscanned``: a NaN model beside a clean file it did read is never
vouched for by that file.
"""

from __future__ import annotations

from typing import Any

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome, norm_path
from chaos.errors import ChaosError
from chaos.evidence.harness_records import CkptVerify
from chaos.evidence.records import CkptCommit


class NoCorruptCommitConfig(CheckConfig):
    golden_digests: bool = False
    """Also compare each committed checkpoint with the fault-free run's at the same step (its digest over every
    tensor and value): catches a flipped bit that is finite and plausible. Only for a workload whose training is
    deterministic, like the reference workloads (a resume replays the same steps bit for bit); any other
    workload's checkpoints differ from the fault-free run's without any corruption."""


class NoCorruptCommit(Check, kind="no_corrupt_commit"):
    """Every committed checkpoint holds only finite values in its weights and optimizer state, as the harness scanned it at commit; with golden_digests, each equals the fault-free run's at its step."""

    Config = NoCorruptCommitConfig
    scans_values = True

    def needs_golden(self, outcome: RunOutcome) -> bool:
        return bool(self.config.golden_digests)  # type: ignore[attr-defined]

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        h = outcome.history
        # One commit per path, attempt and step: a path committed again (a later attempt that saved the same
        # step, a workload that overwrites latest.pt at every save) is another checkpoint, and the witness
        # looks at each (chaos.evidence.witness); a commit without a look of its own is not scanned.
        commits: dict[tuple[str, str, str], CkptCommit] = {}
        for r in h.of("ckpt_commit"):
            if not r.harness and r.path:
                commits.setdefault((norm_path(r.path), str(r.attempt), str(r.step)), r)
        if not commits:
            return self.inconclusive("the run committed no checkpoint (no ckpt_commit event), so no committed "
                                     "state could be scanned")
        looks: dict[tuple[str, str, str], list[CkptVerify]] = {}
        for r in h.harness(CkptVerify):
            if r.seen == "ckpt_commit":
                looks.setdefault((norm_path(r.path), str(r.attempt), str(r.step)), []).append(r)
        figures: dict[str, Any] = {"committed": len(commits), "scanned": 0, "values": 0}
        missing: list[str] = []
        for key, commit in sorted(commits.items(), key=lambda kv: (kv[1].t, kv[0])):
            seen = looks.get(key, [])
            scans = [r.scanned for r in seen if r.scanned is not None]
            step = commit.step
            if not scans:
                gone = any(r.gone for r in seen)
                missing.append(f"step {step} ({'removed before the harness could read it' if gone else 'never scanned'})")
                continue
            # Any scan of it that found a NaN condemns it; one clean scan cannot vouch for another.
            bad = next((v for v in scans if v.get("nonfinite")), None)
            if bad is not None:
                figures["corrupt"] = {"step": step, "path": commit.path, "attempt": key[1],
                                      "nonfinite": bad["nonfinite"], "tensors": bad.get("bad", [])}
                return self.failed(f"the checkpoint committed at step {step} ({commit.path}, attempt {key[1]}) "
                                   f"holds {bad['nonfinite']} non-finite value(s): {', '.join(bad.get('bad', [])[:3])}; "
                                   f"a resume from it carries them on", **figures)
            partial = [v for v in scans if v.get("unscanned") or not v.get("tensors")]
            if partial:
                why = "; ".join(partial[0].get("unscanned") or ["no tensor in it"])
                missing.append(f"step {step} (not all of it could be read: {why})")
                continue
            figures["scanned"] += 1
            figures["values"] += int(scans[0].get("values") or 0)
        if missing:
            return self.inconclusive(f"{len(missing)} of {len(commits)} committed checkpoint(s) were not scanned whole: "
                                     f"{'; '.join(missing[:3])}", **figures)
        finite = f"all {len(commits)} committed checkpoint(s) scanned at commit: {figures['values']} values, none NaN or Inf"
        if not self.config.golden_digests:  # type: ignore[attr-defined]
            return self.passed(finite, **figures)
        return self._against_golden(outcome, commits, looks, figures, finite)

    def _against_golden(self, outcome: RunOutcome, commits: dict[tuple[str, str, str], CkptCommit],
                        looks: dict[tuple[str, str, str], list[CkptVerify]], figures: dict[str, Any],
                        finite: str) -> CheckResult:
        if outcome.golden is None:
            return self.inconclusive(f"{finite}; but the run was started without its fault-free run, so there is "
                                     f"nothing to compare the checkpoints with (golden_digests)", **figures)
        try:
            golden = outcome.golden()
        except ChaosError as exc:
            return self.inconclusive(f"{finite}; but no fault-free run to compare the checkpoints with: {exc}", **figures)
        digests = (golden or {}).get("ckpt_digests")
        if not digests:
            return self.inconclusive(f"{finite}; but the fault-free run recorded no checkpoint digests to compare "
                                     f"them with (golden_digests)", **figures)
        compared, unmatched = [], []
        for key, commit in sorted(commits.items(), key=lambda kv: (kv[1].t, kv[0])):
            step = commit.step
            want = digests.get(str(step))
            got_all = [d for look in looks.get(key, []) if (d := (look.scanned or {}).get("digest"))]
            if want is None or not got_all:
                unmatched.append(step)
                continue
            for got in got_all:
                if got != want:
                    figures["differs"] = {"step": step, "attempt": key[1], "digest": got, "golden": want}
                    return self.failed(f"the checkpoint committed at step {step} (attempt {key[1]}) differs from the "
                                       f"fault-free run's at that step (digest {str(got)[:12]} vs {want[:12]}): its "
                                       f"values are finite, but not the ones training computed at that step: silently "
                                       f"corrupted, or written from tensors training had already changed",
                                       **figures)
            compared.append(step)
        figures.update(golden_compared=compared, golden_absent=unmatched)
        if not compared:
            return self.inconclusive(f"{finite}; but the fault-free run committed none of their steps "
                                     f"({', '.join(map(str, unmatched[:5]))}), so none could be compared", **figures)
        return self.passed(f"{finite}; {len(compared)} of them equal to the fault-free run's at the same step"
                           + (f" (no fault-free checkpoint at step(s) {', '.join(map(str, unmatched[:5]))})"
                              if unmatched else ""), **figures)
