"""The report card: one row per failure class, read from each experiment's journal (the verdicts and figures the
run's own checks computed), with the finding in plain words and its remedy, and the cost at the scale the user
names.

A row says only what its run proved. Survived is the ``completes`` verdict; exactly-once and integrity are their
checks' verdicts, or "not traced"/"no checkpoint" with what would make them judgeable; a kill meant to strike a save
that landed after it (``struck_mid_save`` failed) is "not tested", not survived; a run the harness could not carry
out is an error with its reason. Findings are matched on which check failed and the recovery figures, and each
names the remedy the project documents for it."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from chaos.assess.observe import Observation
from chaos.assess.plan import Probe
from chaos.evidence.events import History
from chaos.gameday.projection import goodput_at
from chaos.report.journal import Journal
from chaos.spec.mixes import LLAMA3_405B

RESTART_PARTS = ("detection", "restart", "ckpt_load")

# The lines that make a job's steps name their samples, per stack it was seen to use (the first that applies).
TRACE_SAMPLES: tuple[tuple[str, str], ...] = (
    ("Hugging Face Transformers", "from chaos.integrations.hf import ChaosCallback, Indexed; "
                                  "Trainer(..., train_dataset=Indexed(ds)); trainer.add_callback(ChaosCallback())"),
    ("Lightning", "from chaos.integrations.lightning import ChaosCallback, Indexed; Indexed(ds) as the dataset, "
                  "ChaosCallback() in Trainer(callbacks=...)"),
    ("Accelerate", "chaos.integrations.samples around the prepared DataLoader (docs/stacks.md)"),
    ("", "from chaos import sdk; sdk.step(step, epoch=epoch, samples=batch_indices, loss=float(loss))"),
)

TORN_BY_STACK: tuple[tuple[str, str], ...] = (
    # What each stack's own resume needs after a torn save (docs/stacks.md, each proven by its own experiment).
    ("Hugging Face Transformers", "resume from chaos.integrations.hf.last_complete_checkpoint(output_dir) instead of "
                                  "get_last_checkpoint, which takes the highest checkpoint-N finished or not "
                                  "(experiments/hf-trainer-kill-during-save-complete.yaml passes)"),
    ("Accelerate", "save with chaos.integrations.accelerate.save_state and resume from its last_complete_checkpoint "
                   "(experiments/accelerate-native-kill-during-save-complete.yaml passes)"),
)

REMEDY = {
    "no_restart": "let the launcher restart the job: torchrun --max-restarts N (or the scheduler's requeue)",
    "scratch": "resume from the newest checkpoint: load it before the first step (the job saved, then started over)",
    "no_checkpoint": "save periodically (write to a temporary name, fsync, rename, then move a 'latest' pointer) and "
                     "resume from the newest on start",
    "older": "resume from the newest complete checkpoint, not an older one",
    "samples": "restore the data order with the checkpoint: torchdata's StatefulDataLoader (its state_dict in the "
               "checkpoint), or accelerate's skip_first_batches, instead of a reshuffle or a restart of the epoch",
    "torn": "write then rename then move the pointer: a save is selectable only once whole (and verify on load)",
    "corrupt": "verify a checkpoint on load (a manifest of checksums) and fall back to the previous one",
    "hang": "set a collective timeout (init_process_group(timeout=...); gloo and NCCL wait 30 and 10 minutes by "
            "default) or a heartbeat watchdog, so a hung rank ends the attempt and the launcher restarts it",
    "nan": "guard before the optimizer step: skip the step (or roll back to the last checkpoint) when the loss or a "
           "gradient is not finite, and never save non-finite weights",
    "storage": "catch the save's error (ENOSPC), keep the previous checkpoint, and retry at the next save instead of "
               "ending the job",
}


@dataclass
class Row:
    probe: str
    failure_class: str
    survived: str
    """yes | no | not tested | not run | error"""
    verdict: str = ""
    lost_steps: int | None = None
    lost_s: float | None = None
    recovery_s: float | None = None
    exactly_once: str = ""
    integrity: str = ""
    finding: str = ""
    remedy: str = ""
    run_dir: str = ""
    experiment: str = ""
    checks: list[dict[str, str]] = field(default_factory=list)


def row_of(probe: Probe, journal: Journal | None, seen: Observation, experiment: str = "") -> Row:
    if not probe.runs:
        return Row(probe.name, probe.title, "not run", finding=probe.skip or "", experiment=experiment)
    if journal is None:
        return Row(probe.name, probe.title, "error", finding="the run wrote no journal", experiment=experiment)
    verdicts = {c.kind: c for c in journal.checks}
    row = Row(probe.name, probe.title, "", verdict=journal.word, run_dir=str(journal.folder), experiment=experiment,
              checks=[{"check": c.kind, "verdict": c.verdict, "reason": c.reason} for c in journal.checks])
    _figures(row, journal)
    row.exactly_once = _verdict_or(verdicts.get("exactly_once"),
                                   "not judged here" if seen.samples_traced else _untraced(seen))
    integrity = verdicts.get("checkpoint_integrity") or verdicts.get("no_corrupt_commit")
    row.integrity = _verdict_or(integrity, "no checkpoint seen" if not seen.checkpoints_seen else "not judged")
    if (journal.exit_code or 0) > 128:
        row.survived = "not tested"
        row.finding = "interrupted: the harness stopped the job and reverted its faults before it could show anything"
        return row
    if journal.exit_code in (2, 3) or journal.word in ("ERROR", "INVALID"):
        row.survived = "error"
        row.finding = "; ".join(journal.diagnostics[:1] + [c.reason for c in journal.checks if c.verdict == "error"][:1]) \
            or f"the harness could not carry the run out (exit {journal.exit_code})"
        return row
    struck = verdicts.get("struck_mid_save")
    if struck is not None and struck.verdict != "pass":
        row.survived = "not tested"
        row.finding = (f"the kill did not land inside a save (a save took {seen.save_s} s here): {struck.reason}")
        return row
    # Every fault of the probe must have struck: a corruption whose kill never came tested no restart, a slowed disk
    # whose kill never came no torn save.
    missed = [f for f in journal.faults if not f.injected]
    if missed or not journal.faults:
        row.survived = "not tested"
        row.finding = "the fault never struck: " + ("; ".join(f"{f.label}: {f.error or f.status}" for f in missed)
                                                    or "the run recorded no fault")
        return row
    untested = _untested(probe, journal)
    if untested:
        row.survived, row.finding = "not tested", untested
        return row
    completes = verdicts.get("completes")
    row.survived = {"pass": "yes", "fail": "no"}.get(completes.verdict if completes else "", "?")
    row.finding, row.remedy = _finding(probe, journal, verdicts, seen, row)
    if probe.name == "hang" and row.survived == "yes" and _failed(verdicts, "detection"):
        row.survived = "only by luck"  # it went on because the harness thawed the rank, not because it acted
    elif probe.name == "nan" and row.remedy == REMEDY["nan"]:
        row.survived = "no"  # it ran to the end, on weights the NaN had reached
    elif row.survived == "yes":
        # A job outlives a frozen rank once it thaws, and runs to its end on poisoned weights: for these classes
        # finishing is no survival; the check that the job acted on the fault is, and it must have passed.
        owed = {"hang": ("detection",), "nan": ("detection", "no_corrupt_commit")}.get(probe.name, ())
        unproven = [k for k in owed if k in verdicts and verdicts[k].verdict != "pass"]
        if unproven:
            row.survived = "not proven"
            row.finding = "; ".join(f"{k} {verdicts[k].verdict.upper()}: {verdicts[k].reason}" for k in unproven)
    return row


def _untested(probe: Probe, journal: Journal) -> str | None:
    """Why this run, although its faults struck, did not test its class; None where it did."""
    if probe.name == "corrupt-newest":
        # The restart met the corrupt save only if no newer one had committed by the kill.
        corrupt, kill = journal.faults[0], journal.faults[-1]
        step, newest = corrupt.details.get("step"), kill.recovery.get("durable_step")
        if not isinstance(step, int) or not isinstance(newest, int):
            return "not proven that the restart met the corrupt checkpoint: the run does not say which save was newest"
        if newest > step:
            return (f"the kill came after a newer save (step {newest}) than the corrupted one (step {step}): the "
                    f"restart never needed the corrupt checkpoint")
    if probe.name == "storage-full":
        fault = journal.faults[0]
        end = fault.t_release or fault.t_revert
        try:
            history = History.from_run_dir(journal.folder)
        except OSError:
            return "not proven that a save met the full disk: the run's records cannot be read"
        during = [r for r in history.of("ckpt_begin", "ckpt_error")
                  if fault.t_inject is not None and end is not None and fault.t_inject <= r.t <= end]
        if not during:
            return "no save began while the disk was full: the job never met it"
    return None


def _verdict_or(result: Any, absent: str) -> str:
    return result.verdict.upper() if result is not None else absent


def _untraced(seen: Observation) -> str:
    line = next(text for stack, text in TRACE_SAMPLES if not stack or stack in seen.stack)
    return f"not traced: the job's steps name no samples; add {line}"


def _struck(journal: Journal) -> Any:
    """The fault a probe is about: its last one (a slowed disk or a corruption first sets the stage for the kill)."""
    return journal.faults[-1] if journal.faults and journal.faults[-1].injected else None


def _figures(row: Row, journal: Journal) -> None:
    fault = _struck(journal)
    rec = fault.recovery if fault is not None else {}
    landed, resumed = rec.get("landed_step"), rec.get("resumed_from_step")
    if isinstance(landed, int) and isinstance(resumed, int):
        row.lost_steps = max(0, landed - resumed)
    if isinstance(rec.get("resume_s"), (int, float)):
        row.recovery_s = round(rec["resume_s"], 2)
    bill = ((journal.goodput or {}).get("by_fault") or {}).get(fault.label) if fault is not None else None
    if bill:
        row.lost_s = round(sum(v for v in bill.values() if isinstance(v, (int, float))), 2)


def _failed(verdicts: dict[str, Any], kind: str) -> Any:
    c = verdicts.get(kind)
    return c if c is not None and c.verdict == "fail" else None


def _finding(probe: Probe, journal: Journal, verdicts: dict[str, Any], seen: Observation, row: Row) -> tuple[str, str]:
    fault = _struck(journal)
    rec = fault.recovery if fault is not None else {}
    completes = _failed(verdicts, "completes")
    attempts = len(journal.attempts)
    if probe.name == "hang" and _failed(verdicts, "detection"):
        return (f"the hung rank went unnoticed: nothing acted within {probe.faults[0].get('duration_s')} s "
                f"({verdicts['detection'].reason})", REMEDY["hang"])
    if probe.name == "nan":
        bad = [b for b in (_failed(verdicts, "detection"), _failed(verdicts, "no_corrupt_commit")) if b]
        if bad:
            return "the NaN was trained on: " + bad[0].reason, REMEDY["nan"]
        if completes:
            return f"the NaN ended the job: {completes.reason}", REMEDY["nan"]
        if _failed(verdicts, "matches_golden"):  # caught in time, yet not the fault-free end: the recovery's doing
            return (f"the NaN was caught, but the run did not end as the fault-free one: "
                    f"{verdicts['matches_golden'].reason}", "")
    if probe.name == "storage-full" and completes:
        return f"the job did not survive a full disk at a save: {completes.reason}", REMEDY["storage"]
    if completes and attempts <= 1 and probe.name in ("rank-kill", "kill-during-save", "corrupt-newest"):
        return f"the job ended at the fault and was not restarted: {completes.reason}", REMEDY["no_restart"]
    if probe.name == "corrupt-newest" and (completes or _failed(verdicts, "checkpoint_integrity")):
        which = completes or _failed(verdicts, "checkpoint_integrity")
        return f"the restart read the corrupt checkpoint: {which.reason}", REMEDY["corrupt"]
    if probe.name == "kill-during-save" and (completes or _failed(verdicts, "checkpoint_integrity")):
        # The integrity check names the torn save and what picks it; the exit says how the restarts ended.
        why = "; ".join(c.reason for c in (_failed(verdicts, "checkpoint_integrity"), completes) if c)
        fix = next((text for stack, text in TORN_BY_STACK if stack in seen.stack), REMEDY["torn"])
        return f"the torn save broke the restart: {why}", fix
    if rec.get("resumed_from_step") == 0 and (rec.get("durable_step") or 0) > 0:
        return (f"restarted from scratch although step {rec.get('durable_step')} was saved: {row.lost_steps} steps "
                f"trained again", REMEDY["scratch"])
    if probe.name in ("rank-kill",) and not seen.checkpoints_seen and row.lost_steps:
        return f"no checkpoint was seen: the restart trained {row.lost_steps} steps again from the start", \
            REMEDY["no_checkpoint"]
    if _failed(verdicts, "recovery_time"):
        return f"resumed from an older checkpoint than the newest: {verdicts['recovery_time'].reason}", REMEDY["older"]
    if _failed(verdicts, "exactly_once"):
        return f"samples trained twice or never: {verdicts['exactly_once'].reason}", REMEDY["samples"]
    if _failed(verdicts, "checkpoint_integrity"):
        return f"a checkpoint does not verify: {verdicts['checkpoint_integrity'].reason}", REMEDY["torn"]
    if completes:
        return f"the job did not recover: {completes.reason}", ""
    failed = [c for c in journal.checks if c.verdict == "fail"]
    if failed:
        return f"{failed[0].kind}: {failed[0].reason}", ""
    open_ = [c for c in journal.checks if c.verdict == "inconclusive"]
    tail = f" (not proven: {', '.join(c.kind for c in open_)})" if open_ else ""
    lost = f", {row.lost_steps} steps redone" if row.lost_steps is not None else ""
    took = f", training again {row.recovery_s} s after the fault" if row.recovery_s is not None else ""
    return f"recovered{lost}{took}{tail}", ""


@dataclass
class Scale:
    gpus: int
    mtbf_h: float
    restart_s: float
    save_s: float
    interval_s: float
    goodput: float
    source: str
    how: dict[str, str]


def project(rows: list[Row], journals: dict[str, Journal], seen: Observation, gpus: int) -> tuple[Scale | None, str]:
    """Expected goodput at ``gpus`` GPUs under the Llama 3 failure rate (the game day projection's model and source),
    from the restart cost the battery measured and the save cost and interval the fault-free run showed."""
    costs = []
    for row in rows:
        journal = journals.get(row.probe)
        fault = _struck(journal) if journal is not None else None
        if row.probe != "rank-kill" or row.survived != "yes" or fault is None:
            continue
        resumed = {c.kind: c.verdict for c in journal.checks}.get("recovery_time") == "pass"
        bill = ((journal.goodput or {}).get("by_fault") or {}).get(fault.label) or {}
        # The model's restart: it resumed from the newest save (a restart from scratch is no such cost), and the
        # split billed every part of it.
        if resumed and all(k in bill for k in RESTART_PARTS):
            costs.append(sum(bill[k] for k in RESTART_PARTS))
    if not costs:
        return None, ("no projection: no rank death was survived here with a resume from the newest save and its "
                      "detection, restart and checkpoint load measured, so there is no restart cost to project")
    if len([s for s in seen.saves if s < seen.final_step]) < 2 or seen.save_s is None or not seen.step_s \
            or not seen.save_every:
        return None, "no projection: the fault-free run showed no periodic save to take the interval and save cost from"
    mix = LLAMA3_405B
    rate = mix.total / (mix.gpus * mix.span_days * 24.0)
    mtbf_s = 3600.0 / (rate * gpus)
    interval = seen.save_every * seen.step_s
    restart = statistics.median(costs)
    value = goodput_at(interval, seen.save_s, restart, mtbf_s)
    how = {"restart_s": f"median detection + restart + checkpoint load of {len(costs)} survived rank death(s) here",
           "save_s": "median ckpt_begin to the last ckpt_commit in the fault-free run",
           "interval_s": f"the job's save interval ({seen.save_every} steps) x its median step ({seen.step_s} s)",
           "model": "goodput = 1 - save_s/interval_s - (restart_s + interval_s/2)/MTBF (Young 1974)"}
    return Scale(gpus, round(mtbf_s / 3600.0, 3), round(restart, 2), seen.save_s, round(interval, 3),
                 round(value, 4), mix.source, how), ""


def card_dict(seen: Observation, probes: list[Probe], rows: list[Row], scale: Scale | None, scale_note: str,
              job: str) -> dict[str, Any]:
    return {"job": job, "observation": seen.as_dict(), "plan": [asdict(p) for p in probes],
            "rows": [asdict(r) for r in rows], "scale": asdict(scale) if scale else None, "scale_note": scale_note}
