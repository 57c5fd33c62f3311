"""The battery: one experiment per failure class, each trigger placed where it bites in this job, and what does not
apply said with its reason.

Placed from the observation: a rank killed halfway between two of the job's saves (so the work since the newest
one is what a restart must redo, and a resume from scratch shows), a kill inside a save's write window (a fraction
of the save's own measured duration after its ``ckpt_begin``), a hang long enough to outlast a sane collective
timeout, a NaN in one rank's loss, the checkpoint filesystem full at the step before a save, and the newest
checkpoint truncated right after it committed with a rank killed next so the restart must read it. A check joins an
experiment only where its evidence can exist (exactly-once needs the samples each step trained, the golden
comparison the job's final digests, integrity a checkpoint): an absent one is a row's "not traced", never a pass."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from chaos.assess.observe import Observation

CLASSES: dict[str, str] = {
    # name -> the failure class as the card names it
    "rank-kill": "a rank dies between two saves",
    "kill-during-save": "a rank dies while a save is written",
    "preempt": "preemption (SIGTERM, then the kill after the grace)",
    "hang": "a rank hangs",
    "nan": "a NaN in one rank's step",
    "storage-full": "the checkpoint filesystem is full at a save",
    "corrupt-newest": "the newest checkpoint is corrupt at the restart",
    "node-lost": "a node is lost",
}


SAVE_WINDOW_S = 2.0
"""How long a save takes on the slowed disk of the kill-during-save probe: several polls of the harness wide."""


@dataclass
class Probe:
    """One experiment of the battery, or the reason it is not run."""

    name: str
    title: str
    faults: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    placed: str = ""
    """Where the trigger was put, and why there."""
    skip: str | None = None
    estimate_s: float = 0.0
    timeout_s: int = 0

    @property
    def runs(self) -> bool:
        return self.skip is None


@dataclass(frozen=True)
class Options:
    hang_s: float = 30.0
    """How long the hung rank stays frozen: a job that has not acted by then is reported as not detecting it."""
    root: bool = field(default_factory=lambda: os.geteuid() == 0)
    only: tuple[str, ...] = ()
    """Run only these probes (the rest are listed as not asked for)."""


def plan(seen: Observation, options: Options | None = None) -> list[Probe]:
    options = options or Options()
    probes = [_rank_kill(seen), _kill_during_save(seen, options), _preempt(seen), _hang(seen, options), _nan(seen),
              _storage_full(seen, options), _corrupt_newest(seen), _node_lost(seen)]
    for p in probes:
        if seen.problem is not None and p.skip is None:
            p.skip = f"not run: {seen.problem}"
        elif options.only and p.name not in options.only and p.skip is None:
            p.skip = "not asked for (--only)"
        if p.runs:
            p.estimate_s = round(_estimate(seen, p), 1)
            p.timeout_s = int(max(120.0, 4 * seen.wall_s + (options.hang_s if p.name == "hang" else 0.0)))
    return probes


def _estimate(seen: Observation, p: Probe) -> float:
    # The job once more, plus a restart (start-up again) where the fault ends an attempt, plus a hang's wait.
    restart = (seen.startup_s or 10.0) + 3.0
    extra = {"hang": 0.0, "nan": 0.0, "storage-full": 0.0}.get(p.name, restart)
    if p.name == "hang":
        extra = next((f.get("duration_s", 0.0) for f in p.faults), 0.0) + restart
    return seen.wall_s + extra


def _mid(seen: Observation) -> tuple[dict[str, Any], int | None, str]:
    """A trigger halfway between two saves (the second and third where there are three), else halfway through."""
    every = seen.save_every
    saves = [s for s in seen.saves if s < seen.final_step]
    if saves and every:
        base = saves[1] if len(saves) > 2 else saves[0]
        step = base + max(1, every // 2)
        if step < seen.final_step:
            return {"at_step": step}, step, (f"step {step}: halfway between the saves at steps {base} and "
                                             f"{base + every} (the job saved every {every} steps)")
    if seen.final_step >= 4:
        step = max(2, seen.final_step // 2)
        why = ("no save was seen" if not seen.checkpoints_seen else
               f"its saves are not events, only files: {', '.join(seen.files[:2])}" if not seen.saves else
               "fewer than two saves before its last step")
        return {"at_step": step}, step, f"step {step}: halfway through the run ({why})"
    after = round(max(1.0, (seen.startup_s or 0.0) + (seen.wall_s - (seen.startup_s or 0.0)) / 2), 1)
    return {"after_s": after}, None, f"{after} s after launch: halfway through the run (no step was seen)"


def _victim(seen: Observation) -> int:
    return max(0, (seen.world_size or 2) - 1)


def _completes(seen: Observation, restarts: int | None = None) -> dict[str, Any]:
    """``completes``, held to the step the fault-free run reached (a launch command names no 'steps' argument)."""
    bounds: dict[str, Any] = {"min_restarts": restarts} if restarts else {}
    if seen.final_step > 0:
        bounds["min_step"] = seen.final_step
    return {"completes": bounds}


def _checks(seen: Observation, *, restarts: int | None, resume_newest: bool = False,
            integrity: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [_completes(seen, restarts)]
    if resume_newest and seen.saves:
        out.append({"recovery_time": {"metric": "lost_steps", "max": 0}})
    if seen.samples_traced:
        out.append({"exactly_once": {}})
    if integrity and seen.checkpoints_seen:
        out.append({"checkpoint_integrity": {}})
    if seen.digests:
        out.append({"matches_golden": {}})
    return out


def _rank_kill(seen: Observation) -> Probe:
    trigger, _, placed = _mid(seen)
    return Probe("rank-kill", CLASSES["rank-kill"], placed=placed,
                 faults=[{"kind": "kill-rank", "rank": _victim(seen), "signal": "SIGKILL", "trigger": trigger}],
                 checks=_checks(seen, restarts=1, resume_newest=True))


def _kill_during_save(seen: Observation, options: Options) -> Probe:
    p = Probe("kill-during-save", CLASSES["kill-during-save"])
    if not seen.speaks_protocol or len([s for s in seen.saves if s < seen.final_step]) < 2:
        p.skip = ("not run: placing a kill inside a save needs the job's ckpt_begin and ckpt_commit events and two "
                  "saves before its last step; seen: " + (f"{len(seen.saves)} committed save(s)" if seen.speaks_protocol
                                                           else "no protocol events"))
        return p
    first = seen.saves[0]
    kill = {"kind": "kill-rank", "rank": 0, "signal": "SIGKILL"}
    p.checks = [_completes(seen, 1), {"struck_mid_save": {}}, {"checkpoint_integrity": {}}] + \
        [c for c in _checks(seen, restarts=1) if not {"completes", "checkpoint_integrity"} & set(c)]
    if options.root and seen.save_bytes and _own_dir(seen):
        # A save of a fraction of a second cannot be struck by a poll; on a disk slowed (as shared storage under
        # load is) to write it in SAVE_WINDOW_S, the kill lands in its middle.
        mbps = round(max(0.001, seen.save_bytes / 1e6 / SAVE_WINDOW_S), 4)
        p.placed = (f"the disk slowed after the save at step {first} to {mbps} MB/s (one save, "
                    f"{seen.save_bytes} bytes, in about {SAVE_WINDOW_S:g} s); rank 0 killed "
                    f"{SAVE_WINDOW_S / 2:g} s into the second save")
        p.faults = [{"kind": "slow-storage", "write_mbps": mbps, "trigger": {"at_step": first + 1}},
                    {**kill, "trigger": {"on_event": {"on_event": "ckpt_begin", "nth": 2},
                                         "delay_s": SAVE_WINDOW_S / 2}}]
        return p
    delay = round(max(0.0, (seen.save_s or 0.0) / 2), 3)
    p.placed = (f"{delay} s after the second save's ckpt_begin: halfway through its measured write "
                f"({seen.save_s} s)")
    p.faults = [{**kill, "trigger": {"on_event": {"on_event": "ckpt_begin", "nth": 2},
                                     **({"delay_s": delay} if delay else {})}}]
    return p


def _preempt(seen: Observation) -> Probe:
    return Probe("preempt", CLASSES["preempt"],
                 skip="not run: a preemption is the scheduler's SIGTERM to the whole job and a kill after its grace; "
                      "the local target has no scheduler to requeue the job (the Slurm target's preempt fault does: "
                      "experiments/slurm-preempt-fsdp.yaml)")


def _hang(seen: Observation, options: Options) -> Probe:
    trigger, _, placed = _mid(seen)
    hold = float(options.hang_s)
    return Probe("hang", CLASSES["hang"], placed=f"{placed}; frozen for {hold:g} s",
                 faults=[{"kind": "hang-rank", "rank": _victim(seen), "duration_s": hold, "trigger": trigger}],
                 # Acted on before the rank thaws by itself: a job that only continues once it does never noticed.
                 checks=[_completes(seen), {"detection": {"max_s": max(1.0, hold - 1.0)}}])


def _nan(seen: Observation) -> Probe:
    trigger, _, placed = _mid(seen)
    checks: list[dict[str, Any]] = [_completes(seen), {"detection": {"max_s": 60, "max_steps": 0}}]
    if seen.saves:
        checks.append({"no_corrupt_commit": {}})
    if seen.digests:
        checks.append({"matches_golden": {}})
    return Probe("nan", CLASSES["nan"], placed=placed,
                 faults=[{"kind": "nan", "rank": _victim(seen), "where": "loss", "trigger": trigger}], checks=checks)


def _storage_full(seen: Observation, options: Options) -> Probe:
    p = Probe("storage-full", CLASSES["storage-full"])
    upcoming = [s for s in seen.saves if 1 < s < seen.final_step]
    if not options.root:
        p.skip = "not run: mounting a small filesystem over the checkpoint directory needs root (run as root)"
    elif not seen.saves or not seen.speaks_protocol:
        p.skip = "not run: no committed save was seen (ckpt_commit), so there is no save to fill the disk before"
    elif not _own_dir(seen):
        p.skip = ("not run: the job saves outside the harness's checkpoint directory (CHAOS_CKPT_DIR), where a "
                  f"filesystem can be mounted for it; it saved to {', '.join(seen.ckpt_paths[:2]) or 'its own folder'}")
    elif not upcoming:
        p.skip = "not run: no save before the last step to strike"
    if p.skip:
        return p
    at = upcoming[1] if len(upcoming) > 1 else upcoming[0]
    hold = round(max(3.0, 3 * (seen.step_s or 0.5) * (seen.save_every or 1)), 1)
    p.placed = f"step {at - 1}: the step before the save at step {at}; full for {hold:g} s"
    p.faults = [{"kind": "storage-full", "fs": "tmpfs", "size_mb": 64, "trigger": {"at_step": at - 1},
                 "duration_s": hold}]
    p.checks = _checks(seen, restarts=None)
    return p


def _under_ckpt(path: str, seen: Observation) -> bool:
    return os.path.join(seen.run_dir, "ckpt") in os.path.abspath(path)


def _own_dir(seen: Observation) -> bool:
    """The job saves in the harness's checkpoint directory (CHAOS_CKPT_DIR), where a filesystem can be mounted."""
    return seen.ckpt_dir is None and bool(seen.ckpt_paths) and all(_under_ckpt(p, seen) for p in seen.ckpt_paths)


def _corrupt_newest(seen: Observation) -> Probe:
    p = Probe("corrupt-newest", CLASSES["corrupt-newest"])
    if not seen.speaks_protocol or len([s for s in seen.saves if s < seen.final_step]) < 2:
        p.skip = ("not run: striking right after a commit needs the job's ckpt_commit events and two saves before "
                  "its last step")
        return p
    if not _own_dir(seen):
        p.skip = "not run: the job saves outside the harness's checkpoint directory (CHAOS_CKPT_DIR)"
        return p
    def when() -> dict[str, Any]:  # a fresh dict per fault: YAML would write a shared one as an alias
        return {"on_event": {"on_event": "ckpt_commit", "nth": 2}}

    p.placed = "the second save, truncated to half right after it committed; a rank killed 0.3 s later"
    p.faults = [{"kind": "corrupt-checkpoint", "mode": "truncate", "target": "latest", "trigger": when()},
                {"kind": "kill-rank", "rank": _victim(seen), "trigger": {**when(), "delay_s": 0.3}}]
    p.checks = _checks(seen, restarts=1)
    return p


def _node_lost(seen: Observation) -> Probe:
    return Probe("node-lost", CLASSES["node-lost"],
                 skip="not run: the job runs on one node here (target local); a node loss needs a multi-node target "
                      "(netns, docker, slurm, kubernetes)")


def total_estimate(probes: list[Probe]) -> float:
    return math.fsum(p.estimate_s for p in probes if p.runs)
