"""``no_corrupt_commit``: every checkpoint the job committed holds finite numbers, as the harness itself read them.

A fault inside the step (a NaN, an Inf) leaves a checkpoint's bytes intact and its weights poisoned;
a resume from it carries the poison on. The witness (chaos.evidence.witness) loads each committed
checkpoint the moment its ``ckpt_commit`` is seen, before retention can take it away, and scans every
tensor (weights, optimizer state) for non-finite values (chaos.checkpoint.values). This check needs
that scan for every committed checkpoint: one it has no scan of, or whose files it could not load, is
evidence missing, never a pass.
"""

from __future__ import annotations

from typing import Any

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome, norm_path


class NoCorruptCommit(Check, kind="no_corrupt_commit"):
    """Every committed checkpoint holds only finite values in its weights and optimizer state, as the harness scanned it at commit."""

    Config = CheckConfig
    scans_values = True

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        h = outcome.history
        # One commit per path and attempt: a path committed again by a later attempt (a resume that saved
        # the same step) is another checkpoint, and the witness looks at each (chaos.evidence.witness).
        commits: dict[tuple[str, str], Any] = {}
        for r in h.of("ckpt_commit"):
            if r.get("source") != "harness" and r.get("path"):
                commits.setdefault((norm_path(r["path"]), str(r.get("attempt"))), r)
        if not commits:
            return self.inconclusive("the run committed no checkpoint (no ckpt_commit event), so no committed "
                                     "state could be scanned")
        looks: dict[tuple[str, str], list[Any]] = {}
        for r in h.of("ckpt_verify"):
            if r.get("seen") == "ckpt_commit":
                looks.setdefault((norm_path(r.get("path")), str(r.get("attempt"))), []).append(r)
        figures: dict[str, Any] = {"committed": len(commits), "scanned": 0, "values": 0}
        missing: list[str] = []
        for key, commit in sorted(commits.items(), key=lambda kv: (kv[1].get("t", 0.0), kv[0])):
            seen = looks.get(key, [])
            scans = [r["values"] for r in seen if isinstance(r.get("values"), dict)]
            step = commit.get("step")
            if not scans:
                gone = any(r.get("gone") for r in seen)
                missing.append(f"step {step} ({'removed before the harness could read it' if gone else 'never scanned'})")
                continue
            # Any scan of it that found a NaN condemns it; one clean scan cannot vouch for another.
            bad = next((v for v in scans if v.get("nonfinite")), None)
            if bad is not None:
                figures["corrupt"] = {"step": step, "path": commit.get("path"), "attempt": key[1],
                                      "nonfinite": bad["nonfinite"], "tensors": bad.get("bad", [])}
                return self.failed(f"the checkpoint committed at step {step} ({commit.get('path')}, attempt {key[1]}) "
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
        return self.passed(f"all {len(commits)} committed checkpoint(s) scanned at commit: {figures['values']} values, "
                           f"none NaN or Inf", **figures)
