"""``struck_mid_save``: each kill struck while a save was being written, and that save never committed.

A kill-during-save experiment proves something only when its kill tore a save. On a busy machine
the trigger (a ckpt_begin plus a delay) can land after the save committed, or before it began, and
then the experiment tested an ordinary kill between saves: its other checks pass and say nothing
about torn checkpoints. This check fails that vacuous run, from the run's own records: at the
moment the fault struck, the newest ``ckpt_begin`` of its attempt had no ``ckpt_commit`` of the same
step and path yet, and none came afterwards in that attempt.

``phase: staged`` judges the phase before the write instead (an asynchronous save, chaos.sdk ``ckpt_staged``):
the kill struck after the newest ``ckpt_staged`` of its attempt and before that save's writer began (its
``ckpt_begin``), and the save never committed in that attempt: the state existed only as the staged copy in
memory, and the resume must not find any of it. A missing begin counts only from a workload seen to report its
writers' begins (each staged save it committed before the kill carries one); and a struck rank must have staged the
save itself, unless the workload is seen to stage every save on rank 0 alone (Lightning saves on global rank 0 only).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.checks.base import norm_path as _norm
from chaos.evidence.harness_records import CkptVerify
from chaos.evidence.records import CkptCommit, CkptLoad


class StruckMidSaveConfig(CheckConfig):
    faults: list[str] = Field(default_factory=lambda: ["kill-rank", "kill-node"])
    """Fault kinds that must each strike inside a save (the others in the experiment are not judged)."""
    phase: Literal["writing", "staged"] = "writing"
    """Which phase of the save each kill must strike: ``writing`` (after its ckpt_begin, before its commit) or
    ``staged`` (an asynchronous save staged in memory, its writer not yet begun)."""


class StruckMidSave(Check, kind="struck_mid_save"):
    """Each kill struck while a save was being written, and that save never committed: the experiment really tested a torn save."""

    Config = StruckMidSaveConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        faults = [f for f in outcome.injected_faults if f.kind in self.config.faults]
        if not faults:
            return self.inconclusive(f"no {' or '.join(self.config.faults)} fault was injected, so no save can have "
                                     f"been torn (did the trigger fire? see harness.jsonl)")
        if self.config.phase == "staged":
            if not outcome.history.of("ckpt_staged"):
                return self.inconclusive("the workload reported no ckpt_staged, so when its saves were staged is "
                                         "unknown; report an asynchronous save's staging with chaos.sdk ckpt_staged")
            failed, figures = self.judge_each(faults, lambda fault: self._judge_staged(fault, outcome))
            if failed:
                return failed
            unproven = [f"{k}: {v['unproven']}" for k, v in figures.items() if v.get("unproven")]
            if unproven:
                return self.inconclusive("; ".join(unproven), **figures)
            return self.passed("; ".join(f"{k} struck {v['into_save_s']} s after the step-{v['step']} state was staged "
                                         f"in attempt {v['attempt']}, before its writer began; that save never "
                                         f"committed" for k, v in figures.items()), **figures)
        if not outcome.history.of("ckpt_begin"):
            return self.inconclusive("the workload reported no ckpt_begin, so when its saves were open is unknown; "
                                     "report saves with chaos.sdk ckpt_begin/ckpt_commit (or a chaos.integrations "
                                     "callback)")
        failed, figures = self.judge_each(faults, lambda fault: self._judge(fault, outcome))
        if failed:
            return failed
        return self.passed("; ".join(f"{k} struck {v['into_save_s']} s into the step-{v['step']} save of attempt "
                                     f"{v['attempt']}, which never committed" for k, v in figures.items()), **figures)

    @staticmethod
    def _judge_staged(fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        h = outcome.history
        t = fault.t_inject or 0.0
        attempt = fault.details.get("attempt") or fault.recovery.get("attempt_before")
        figs: dict[str, Any] = {"attempt": attempt, "step": None, "into_save_s": None, "phase": "staged"}
        if attempt is None:
            return "the fault recorded no attempt it struck", figs
        attempt = str(attempt)
        staged = [r for r in h.of("ckpt_staged", attempt=attempt) if r.t <= t]
        if not staged:
            return f"it struck attempt {attempt} before any save was staged", figs
        last = max(staged, key=lambda r: r.t)
        step = last.step  # an int: the protocol drops a ckpt_staged without one
        figs.update(step=step, into_save_s=round(t - last.t, 3))
        # The struck ranks staged it themselves (the copy they held is what the kill lost), where the fault names them.
        struck = fault.details.get("ranks")
        if isinstance(struck, list) and struck and all(isinstance(r, int) for r in struck):
            stagers = {r.rank for r in staged if r.step == step}
            unstaged = sorted(set(struck) - stagers)
            # A stack that stages once for all ranks (Lightning saves on global rank 0 only) holds the copy on rank 0,
            # and a kill of any rank takes the job down with it: only where the history shows that of every save.
            if unstaged and 0 in stagers and _stages_on_rank_0_alone(h, t, attempt, step, unstaged):
                figs["staged_for_all_by_rank_0"] = unstaged
            elif unstaged:
                return (f"rank(s) {unstaged} it struck had not staged the step-{step} save (only "
                        f"{sorted(stagers)} had)"), figs
        # Any begin of that save in the attempt up to the kill: its writer had begun, whatever order the ranks' and the
        # writer's events came in (a writer thread may begin before the staging is reported).
        begun = [r for r in h.of("ckpt_begin", attempt=attempt) if r.step == step and r.t <= t]
        if begun:
            return (f"the step-{step} save's writer had begun {round(t - begun[-1].t, 3)} s before it struck: a kill "
                    f"while writing, not before the write (shorten the trigger's delay_s, or hold the writer's start "
                    f"longer)"), figs
        commits = [r for r in h.of("ckpt_commit", attempt=attempt) if r.step == step]
        if commits:
            return (f"it struck {figs['into_save_s']} s after the step-{step} state was staged, but that save "
                    f"committed all the same ({round(commits[0].t - t, 3):+} s from the kill): nothing was lost"), figs
        if _loaded_whole(h, attempt, step, "", t) is not None:
            return (f"it struck {figs['into_save_s']} s after the step-{step} state was staged, but that save reached "
                    f"disk: the next attempt loaded it, verified whole"), figs
        # No begin is proof the writer had not begun only from a workload seen to report its writers' begins: one
        # that never does (ckpt_staged and ckpt_commit alone) may have been tearing the file when the kill struck.
        unshown = _begins_unreported(h, t)
        if unshown:
            figs["unproven"] = unshown
        return None, figs

    @staticmethod
    def _judge(fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        h = outcome.history
        t = fault.t_inject or 0.0
        attempt = fault.details.get("attempt") or fault.recovery.get("attempt_before")
        figs: dict[str, Any] = {"attempt": attempt, "step": None, "into_save_s": None}
        if attempt is None:
            return "the fault recorded no attempt it struck", figs
        attempt = str(attempt)
        begins = [r for r in h.of("ckpt_begin", attempt=attempt) if r.t <= t]
        if not begins:
            return f"it struck attempt {attempt} before any save began: no save was torn", figs
        last = max(begins, key=lambda r: r.t)
        step = last.step
        figs.update(step=step, into_save_s=round(t - last.t, 3))
        # The same save: its step, and its path (a step may write several files, e.g. Lightning's top-k
        # checkpoint and then last.ckpt, each a save of its own). A commit naming none of the step's begun
        # paths (a relative path, another spelling) cannot be told apart, so it counts: never a false PASS.
        begun = {_norm(r.path) for r in begins if r.step == step} - {""}
        mine = _norm(last.path)

        def completes(commit: CkptCommit) -> bool:
            path = _norm(commit.path)
            return not mine or not path or path == mine or path not in begun

        commits = [r for r in h.of("ckpt_commit", attempt=attempt)
                   if r.step == step and r.t >= last.t and completes(r)]
        before = [r for r in commits if r.t <= t]
        if before:
            return (f"the step-{step} save had committed {round(t - before[0].t, 3)} s before it struck: it "
                    f"killed a job between saves, not a save (shorten the trigger's delay_s, or widen the write "
                    f"window with a save delay)"), figs
        if commits:
            return (f"it struck {figs['into_save_s']} s into the step-{step} save, but that save still committed "
                    f"{round(commits[0].t - t, 3)} s later: nothing was torn"), figs
        durable = _loaded_whole(h, attempt, step, mine, t)
        if durable is not None:
            # Durable before the kill, unannounced: the next attempt resumed from that very save, and the
            # harness verified it whole when the load was seen. A kill between saves, not inside one.
            return (f"it struck {figs['into_save_s']} s into the step-{step} save, but that save was already "
                    f"durable: attempt {durable.attempt} loaded it and the harness verified it whole at the "
                    f"load (the kill came between its last write and its ckpt_commit; shorten the trigger's "
                    f"delay_s, or widen the write window with a save delay)"), figs
        return None, figs


def _begins_unreported(h: Any, t: float) -> str:
    """Why the workload is not seen to report its writers' begins ("" where it is): each staged save it committed
    before ``t`` must carry a ``ckpt_begin`` of its attempt and step before its commit, and there must be one."""
    commits = [c for c in h.of("ckpt_commit") if c.t <= t]
    saves = {(str(c.attempt), c.step): c for s in h.of("ckpt_staged") if s.t <= t
             for c in commits if str(c.attempt) == str(s.attempt) and c.step == s.step and c.t >= s.t}
    if not saves:
        return ("the workload does not report its writers' begins: no save it staged committed before the kill, so "
                "nothing shows that a writer which had begun would have said so (its ckpt_begin), and the missing "
                "begin of the struck save proves nothing")
    begins = h.of("ckpt_begin")
    unbegun = sorted(step for (attempt, step), c in saves.items()
                     if not any(b.step == step and str(b.attempt) == attempt and b.t <= c.t for b in begins))
    if unbegun:
        return (f"the workload does not report its writers' begins: its staged save(s) of step(s) "
                f"{', '.join(map(str, unbegun))} committed without a ckpt_begin, so the struck save's missing begin "
                f"proves nothing (report ckpt_begin when the writer starts)")
    return ""


def _stages_on_rank_0_alone(h: Any, t: float, attempt: str, step: int, unstaged: list[int]) -> bool:
    """The workload stages each save on rank 0 alone, for all ranks: no rank but 0 ever reported a ``ckpt_staged``,
    and each of ``unstaged`` trained past an earlier save that rank 0 staged before ``t`` (it lived through that
    save and did not stage it: not a rank that was merely slower to stage the struck one). The history cannot tell
    this from a sharded save whose every rank stages while only rank 0 reports it: there a struck rank 1 is credited
    as staged when it may have been mid-copy. The save never committing and the resume finding none of it is judged
    the same either way."""
    staged = h.of("ckpt_staged")
    if any(r.rank != 0 for r in staged):
        return False
    earlier = [r for r in staged if r.t <= t and not (str(r.attempt) == attempt and r.step == step)]
    steps = [r for r in h.of("step") if r.source != "output" and isinstance(r.step, int)]
    return all(any(q.rank == rank and str(q.attempt) == str(s.attempt) and q.step > s.step and q.t >= s.t
                   for s in earlier for q in steps) for rank in unstaged)


def _loaded_whole(h: Any, attempt: str, step: int, path: str, t: float) -> CkptLoad | None:
    """A later attempt's ``ckpt_load`` of this save (its step, and its path where both name one) that the
    harness's witness verified intact when the load was seen, or None."""
    looks = [r for r in h.harness(CkptVerify) if r.seen == "ckpt_load" and r.ok is True]
    for load in h.of("ckpt_load"):
        if load.t <= t or str(load.attempt) == attempt or load.step != step:
            continue
        where = _norm(load.path)
        if path and where and where != path:
            continue
        if any(_norm(r.path) == where and str(r.attempt) == str(load.attempt)
               and r.t_event == load.t for r in looks) and where:
            return load
    return None
