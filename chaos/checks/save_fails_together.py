"""``save_fails_together``: a save whose write failed on one rank fails on every rank, and nobody hangs.

When one rank's checkpoint write fails (its disk, its mount, its quota) and its peers' succeed, the
save has failed: the checkpoint lacks that rank's part. A checkpointer must then agree on it, every
rank giving the save up (or retrying it) together, and go on training. The failures users report are
the two ways of not agreeing: the peers wait in the save's next collective for a rank that is busy
with its error, until a collective timeout kills the job minutes later; or rank 0 commits a
checkpoint without the failed part.

Judged for each ``write-error`` fault from the harness's own record of what the filesystem failed (the
``slowfs`` record: each failed operation, its time and file), against the workload's events:

* the save a failure struck is the newest ``ckpt_begin`` before it (its step and attempt);
* every rank of that attempt (its ``start`` records) shows it moved on within ``max_s`` of the save's
  first failed write: a record of its own after it (a step, a ``ckpt_error``, a commit, a final) or
  its process's exit as the harness saw it. A rank that did nothing for ``max_s`` hung: FAIL;
* the save itself reaches an outcome within ``max_s`` (a ``ckpt_error`` or commit of its step, a later
  save, the attempt's end): an asynchronous writer can hang while training steps on;
* the save is not committed while the fault was still failing writes (a commit after the fault was
  released may be a retry that wrote everything, and the checkpoint checks judge what it holds): FAIL;
* a save given up was given up by every rank: each rank's own ``ckpt_error`` of it, or its process's end.
  Moving on alone does not prove it (a rank that trains on may take the save for a good one): INCONCLUSIVE.

INCONCLUSIVE: no write-error fault; its record lists no failed write (the globs matched no file the
job wrote while it acted); no ``ckpt_begin`` before a failure (which save it struck is unknown); no
``start`` records for the attempt (which ranks must move on is unknown).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.evidence.harness_records import Slowfs, WorkerExit

MOVED_ON = ("step", "ckpt_error", "ckpt_commit", "ckpt_begin", "final")
"""A rank's own records that can show it is not stuck in the failed save (``_past_the_save`` says which do)."""


def _past_the_save(rec: Any, step: int) -> bool:
    """Whether a rank's record shows the save of ``step`` is over for it: not entering that very save (its own
    ``ckpt_begin``), not a step at or before it."""
    if rec.ev == "ckpt_begin":
        return rec.step != step
    if rec.ev == "step":
        return isinstance(rec.step, int) and rec.step > step
    return True


class SaveFailsTogetherConfig(CheckConfig):
    max_s: float = Field(default=30.0, gt=0)
    """Every rank must move on within this many seconds of the save's first failed write (well under the
    collective timeout a hung rank would otherwise wait out)."""
    faults: list[str] = Field(default_factory=lambda: ["write-error"])
    """Fault kinds whose failed writes are judged."""


class SaveFailsTogether(Check, kind="save_fails_together"):
    """A save whose write failed on one rank fails on every rank, within a bound, and nobody hangs in a collective."""

    Config = SaveFailsTogetherConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        faults = [f for f in outcome.injected_faults if f.kind in self.config.faults]
        if not faults:
            return self.inconclusive(f"no {' or '.join(self.config.faults)} fault was injected, so no write failed")
        failed, figures = self.judge_each(faults, lambda f: self._judge(f, outcome))
        if failed:
            return failed
        parts = []
        for label, figs in figures.items():
            if figs.get("inconclusive"):
                return self.inconclusive(f"{label}: {figs['inconclusive']}", **figures)
            parts.append(f"{label} failed {figs['failed_ops']} write(s) in {len(figs['saves'])} save(s) "
                         f"({'; '.join(figs['saves'])})")
        return self.passed("; ".join(parts), **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        h = outcome.history
        figs: dict[str, Any] = {"failed_ops": 0, "saves": []}
        stats = [r for r in h.harness(Slowfs) if r.fault == fault.label]
        failures = sorted((f for r in stats for f in (r.failures or []) if isinstance(f, dict)
                           and isinstance(f.get("t"), (int, float))), key=lambda f: f["t"])
        figs["failed_ops"] = max([r.failed_ops or 0 for r in stats] or [0])
        if failures and figs["failed_ops"] > len(failures):
            figs["inconclusive"] = (f"the filesystem's record lists {len(failures)} of {figs['failed_ops']} failed "
                                    f"writes: the saves the others struck were not judged")
            return None, figs
        if not failures:
            figs["inconclusive"] = ("the filesystem failed no write while the fault acted (no file the job wrote "
                                    "matched its paths; check the globs against the checkpoint's files)"
                                    if stats else "no slowfs record of what the fault failed")
            return None, figs
        begins = sorted(h.of("ckpt_begin"), key=lambda r: r.t)
        acting_until = fault.t_release or fault.t_revert
        saves: dict[tuple[str, int], dict[str, Any]] = {}
        for f in failures:
            before = [b for b in begins if b.t <= f["t"]]
            if not before:
                figs["inconclusive"] = (f"a write of {f.get('path')} failed before any ckpt_begin: which save it "
                                        f"struck is unknown (report saves with chaos.sdk ckpt_begin)")
                return None, figs
            b = before[-1]
            saves.setdefault((str(b.attempt), int(b.step or 0)), f)
        for (attempt, step), first in saves.items():
            verdict, why = self._judge_save(outcome, attempt, step, first, acting_until)
            if verdict == "fail":
                return why, figs
            if verdict == "inconclusive":
                figs["inconclusive"] = why
                return None, figs
            figs["saves"].append(why)
        return None, figs

    def _judge_save(self, outcome: RunOutcome, attempt: str, step: int, first: dict[str, Any],
                    acting_until: float | None) -> tuple[str, str]:
        """("fail" | "inconclusive" | "pass", why) for the save of ``step`` in ``attempt`` that ``first`` struck."""
        h = outcome.history
        t_fail = float(first["t"])
        what = f"the write of {first.get('path')} failed ({first.get('errno')})"
        # Every rank the attempt had (its world size, the harness's spawns), not only those that said start.
        ranks = sorted(r for r in h.attempt_ranks().get(attempt, set()) if isinstance(r, int))
        if not ranks:
            return "inconclusive", (f"no rank of attempt {attempt} is known: which ranks had to move on after the "
                                    f"step-{step} save failed cannot be said")
        exits = {r.rank: r.t for r in h.harness(WorkerExit, attempt=attempt) if r.t > t_fail}
        slowest: tuple[float, int, str] = (0.0, -1, "")
        for rank in ranks:
            after = [r for r in h.of(*MOVED_ON, attempt=attempt) if r.rank == rank and r.t > t_fail
                     and _past_the_save(r, step)]
            first_sign = min(after, key=lambda r: r.t) if after else None
            t_exit = exits.get(rank)
            candidates = [(first_sign.t - t_fail, first_sign.ev)] if first_sign is not None else []
            if t_exit is not None:
                candidates.append((t_exit - t_fail, "its process exited"))
            if not candidates:
                return "fail", (f"{what} in the step-{step} save of attempt {attempt}, and rank {rank} never did "
                                f"anything after it (no step past it, no ckpt_error, no exit): it hung in the save")
            delay, how = min(candidates)
            if delay > self.config.max_s:
                return "fail", (f"{what} in the step-{step} save of attempt {attempt}, and rank {rank} did nothing "
                                f"for {delay:.1f} s (bound {self.config.max_s:g} s; then: {how}): it waited in the "
                                f"save for a rank that had given up or was handling its error")
            slowest = max(slowest, (delay, rank, how))
        # The save itself must end too: an asynchronous writer can hang while training steps on.
        ends = [r.t for r in h.of("ckpt_error", "ckpt_commit", attempt=attempt) if r.step == step and r.t > t_fail]
        ends += [r.t for r in h.of("ckpt_begin", attempt=attempt) if r.t > t_fail and r.step != step]
        if len(exits) == len(ranks):
            ends.append(max(exits.values()))
        if not ends or min(ends) - t_fail > self.config.max_s:
            took = f"{min(ends) - t_fail:.1f} s" if ends else "the rest of the run"
            return "fail", (f"{what} in the step-{step} save of attempt {attempt}, and the save reached no outcome "
                            f"for {took} (bound {self.config.max_s:g} s: no ckpt_error, no commit, no later save, the "
                            f"attempt still running): its writer hung")
        commits = [c for c in h.of("ckpt_commit", attempt=attempt) if c.step == step and c.t > t_fail]
        during = [c for c in commits if acting_until is None or c.t < acting_until]
        if during:
            return "fail", (f"{what} in the step-{step} save of attempt {attempt}, and the save was still "
                            f"committed {during[0].t - t_fail:.2f} s later while the fault went on failing writes: a "
                            f"checkpoint without the failed part")
        if commits:
            # After the release a retry may have written the part, or rank 0 may have committed without it: only
            # a sign of the retry (a ckpt_error or a new ckpt_begin of the save) tells.
            retried = [r for r in h.of("ckpt_error", "ckpt_begin", attempt=attempt)
                       if r.step == step and t_fail < r.t < commits[0].t]
            if not retried:
                return "inconclusive", (f"step {step} of attempt {attempt}: {what}, and the save was committed after "
                                        f"the fault ended with no sign of a retry (no ckpt_error or new ckpt_begin "
                                        f"of it): whether the failed part was written again is unknown")
        if not commits:
            # Moving on is not agreeing: a rank that trains on without a word may take the save for a good one. Each
            # rank's own ckpt_error of the save (or its process's end) says it gave the save up too.
            gave_up = {r.rank for r in h.of("ckpt_error", attempt=attempt) if r.step == step and r.t > t_fail}
            silent = [rank for rank in ranks if rank not in gave_up and rank not in exits]
            if silent:
                told = f"only rank(s) {', '.join(map(str, sorted(gave_up)))} reported" if gave_up else "no rank reported"
                return "inconclusive", (f"step {step} of attempt {attempt}: {what}; every rank moved on, but {told} "
                                        f"the save failed (ckpt_error): whether rank(s) {', '.join(map(str, silent))} "
                                        f"took it for a good one is unknown; emit ckpt_error on every rank that "
                                        f"gives a save up")
        stuck = [r for r in h.of("stuck", "timeout") if r.harness and r.t > t_fail]
        if stuck:
            return "inconclusive", (f"step {step} of attempt {attempt}: {what}; every rank moved on, but the run "
                                    f"was then {stuck[0].ev} ({stuck[0].t - t_fail:.1f} s later): whether the save "
                                    f"left it hung is unknown")
        ended = ("committed after the fault ended" if commits else
                 "given up by every rank (ckpt_error)" if any(e.step == step
                                                             for e in h.of("ckpt_error", attempt=attempt))
                 else "never committed")
        return "pass", (f"step {step} of attempt {attempt}: {what}; every rank moved on within {slowest[0]:.2f} s "
                        f"(slowest rank {slowest[1]}: {slowest[2]}); the save was {ended}")
