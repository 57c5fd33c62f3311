"""A training job played as records, with the ground truth known: what was trained, saved, loaded and corrupted.

In the spirit of Jepsen's generated histories: ``play(Params)`` writes what the ranks and the harness
would have written for one scenario (a kill, a corruption found at the resume, a hang, a world-size
change), and keeps beside it what really happened (``Truth``), so that ``mutations.py`` can break
exactly one property a check promises and the tests can assert that no check PASSes the lie.

Ranks write the protocol (``start``, ``step`` with ``samples``, ``ckpt_*``, ``final``); the harness
writes its own records (``launch``, ``worker_spawn``/``worker_exit``, the witness's ``ckpt_verify``,
``exit``) with ``source: harness``; faults are ``FaultRecord`` s whose recovery figures are computed by
``chaos.evidence.recovery`` from the (possibly mutated) history, as the runner does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from histsim import make_outcome

from chaos.errors import ChaosError
from chaos.evidence.events import HARNESS_LOG, History
from chaos.evidence.outcome import FaultRecord, RunOutcome
from chaos.evidence.recovery import compute_recovery

SCENARIOS = ("kill", "corrupt", "hang", "resize", "nan")
CLEAN = {"tensors": 6, "values": 600, "nonfinite": 0, "bad": [], "unscanned": []}
"""The witness's scan of a checkpoint with only finite values (chaos.checkpoint.values)."""
POISONED = {"tensors": 6, "values": 600, "nonfinite": 600, "bad": ["state.pt.model.w (100 of 100)"], "unscanned": []}


@dataclass(frozen=True)
class Params:
    """One job: its shape, its checkpoints and where the fault lands."""

    scenario: str = "kill"
    world: int = 2
    dataset: int = 16
    batch: int = 2
    """Per rank and step."""
    steps: int = 12
    ckpt_every: int = 4
    fault_at: int = 6
    """The step the ranks had reached when the fault acted (after the first commit, before the last step)."""
    seed: int = 0
    epoch_base: int = 0
    """The epoch number of the first epoch (a workload may count from 1)."""
    rollback: str = "restart"
    """nan scenario: how the guard goes back to the last checkpoint: ``restart`` (a new attempt) or ``in_process``
    (the ranks reload it and train on in the same attempt, a new segment of its lineage)."""


@dataclass
class Truth:
    """What the simulated job really did, and what it wrote."""

    params: Params
    records: list[dict[str, Any]]
    faults: list[FaultRecord]
    golden: dict[str, Any]
    args: dict[str, Any]
    resumed_from: int
    """The step the restart loaded (the newest committed, uncorrupted checkpoint before the fault)."""
    corrupted_path: str | None = None
    exit_code: int = 0
    timed_out: bool = False
    diagnostics: list[str] = field(default_factory=list)
    golden_error: str | None = None
    """The fault-free run could not be had (it failed): ``outcome.golden()`` raises this."""

    def history(self) -> History:
        """The history as the harness reads a run directory: each rank's own file, validated, and harness.jsonl.

        A record marked ``forged`` is written into a rank's file whatever it claims to be (a workload
        line that says ``source: harness``)."""
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(f"{tmp}/events")
            files: dict[str, list[str]] = {}
            for r in self.records:
                r = dict(r)
                forged = r.pop("forged", False)
                name = HARNESS_LOG if r.get("source") == "harness" and not forged else \
                    f"events/{r.get('host', 'h')}-{r.get('pid', 0)}.jsonl"
                files.setdefault(name, []).append(json.dumps(r))
            for name, lines in files.items():
                with open(f"{tmp}/{name}", "w") as fh:
                    fh.write("\n".join(lines) + "\n")
            return History.from_run_dir(tmp)

    def outcome(self) -> RunOutcome:
        history = self.history()
        faults = [replace(f, details=dict(f.details), recovery={}) for f in self.faults]
        for f in faults:
            f.recovery = compute_recovery(history, f, others=[o for o in faults if o is not f])
        golden, error = dict(self.golden), self.golden_error

        def summary() -> dict[str, Any]:
            if error:
                raise ChaosError(error)
            return golden

        return make_outcome(history, args=self.args, exit_code=self.exit_code, timed_out=self.timed_out,
                            faults=faults, golden=summary, diagnostics=list(self.diagnostics))


def order(params: Params, epoch: int) -> list[int]:
    """The global sample order of one epoch: a seeded permutation, a pure function of (seed, epoch)."""
    perm = list(range(params.dataset))
    random.Random(params.seed * 1000 + epoch).shuffle(perm)
    return perm


def global_batches(params: Params, world: int, steps: int) -> list[tuple[int, list[int]]]:
    """(epoch, indices) of each step 1..steps, for ``world`` ranks taking ``batch`` each from a global cursor."""
    out, epoch, offset = [], 0, 0
    for _ in range(steps):
        perm = order(params, epoch)
        take = perm[offset:offset + params.batch * world]
        out.append((epoch + params.epoch_base, take))
        offset += len(take)
        if offset >= params.dataset:
            epoch, offset = epoch + 1, 0
    return out


def state_digest(params: Params, step: int, world: int) -> str:
    """The model+optimizer digest after ``step``: a pure function of what was trained (not of the faults)."""
    return hashlib.sha256(f"{params.seed}:{step}:{params.dataset}".encode()).hexdigest()


def loss_at(step: int) -> float:
    return round(2.0 / (1 + step), 6)


class _Writer:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.t = 1000.0
        self.pids: dict[tuple[str, int], int] = {}

    def tick(self, dt: float = 0.5) -> float:
        self.t += dt
        return self.t

    def pid(self, attempt: str, rank: int) -> int:
        return self.pids.setdefault((attempt, rank), 4000 + len(self.pids))

    def rank(self, ev: str, attempt: str, rank: int, world: int, **fields: Any) -> dict[str, Any]:
        rec = {"ev": ev, "t": self.tick(), "mono": self.t, "pid": self.pid(attempt, rank), "host": "h",
               "rank": rank, "world_size": world, "attempt": attempt, **fields}
        self.records.append(rec)
        return rec

    def harness(self, ev: str, **fields: Any) -> dict[str, Any]:
        rec = {"ev": ev, "t": self.tick(0.1), "mono": self.t, "pid": 1, "host": "h", "source": "harness", **fields}
        self.records.append(rec)
        return rec


AUTO = "auto"


def play(params: Params, *, resume_step: int | None = None, resume_path: str | None = AUTO, reject: bool = True,
         cursor_shift: int = 0, step_shift: int = 0, guard_lag: int | None = 0) -> Truth:
    """The job as it ran: one attempt to the fault, the restart from the newest good checkpoint, the end.

    The keywords replay a broken restart instead (a mutation's ground truth): ``resume_step`` loads
    another step than the newest good one (``resume_path`` None: a load that names no path);
    ``reject`` False passes over a corrupted checkpoint without saying so; ``cursor_shift`` starts
    the data cursor that many global batches off (positive skips, negative repeats); ``step_shift``
    numbers the restart's steps that much higher. In the ``nan`` scenario the fault acts in the step after
    ``fault_at`` on the last rank and a guard stops the attempt; ``guard_lag`` trains that many poisoned
    steps first (committing poisoned checkpoints on the way), None: no guard, the job trains on to the end."""
    p = params
    w = _Writer()
    args = {"steps": p.steps, "ckpt_every": p.ckpt_every, "seed": p.seed}
    assert p.ckpt_every <= p.fault_at <= p.steps, "the fault lands after the first commit"
    assert p.scenario != "nan" or p.fault_at < p.steps, "an in-step fault acts in the step after fault_at"
    poisoned_from: list[int] = []
    """The step from which the nan scenario's state is poisoned (once the fault acted)."""
    world_after = p.world + 1 if p.scenario == "resize" else p.world
    w.harness("launch", launch=0, target="local")
    w.harness("pointer_watch", pointer="/ckpt/latest", interval_s=0.005, state="start")
    committed: dict[int, dict[str, Any]] = {}

    def begin(attempt: str, world: int, generation: int, load: int, path: str | None,
              reject: str | None = None) -> None:
        for rank in range(world):
            w.harness("worker_spawn", worker_pid=w.pid(attempt, rank), rank=rank, node="h", attempt=attempt,
                      generation=generation)
        for rank in range(world):
            w.rank("start", attempt, rank, world, local_rank=rank, device="cpu", dataset_size=p.dataset)
        for rank in range(world if reject else 0):
            w.rank("ckpt_reject", attempt, rank, world, path=reject, reason="checksum mismatch")
        for rank in range(world):
            w.rank("ckpt_load", attempt, rank, world, step=load, path=path)
        if path:
            look(attempt, "ckpt_load", path, load)

    def look(attempt: str, seen: str, path: str, step: int, ok: bool = True, reloaded: bool = False) -> None:
        event = [r for r in w.records if r["ev"] == seen and r.get("path") == path and r["attempt"] == attempt][
            -1 if reloaded else 0]
        poisoned = attempt == "0.0" and bool(poisoned_from) and step >= poisoned_from[0]
        world = p.world if attempt == "0.0" else world_after
        digest = ("poisoned-" if poisoned else "") + state_digest(p, step, world)
        w.harness("ckpt_verify", path=path, step=step, seen=seen, attempt=attempt, t_event=event["t"], ok=ok,
                  gone=False, format="manifest", problems=[] if ok else ["checksum mismatch in shard 0"],
                  values=dict(POISONED if poisoned else CLEAN, digest=digest))

    def train(attempt: str, world: int, first: int, last: int, batches: list[tuple[int, list[int]]],
              shift: int = 0) -> None:
        for step in range(first, last + 1):
            epoch, take = batches[step - 1]
            for rank in range(world):
                w.rank("step", attempt, rank, world, step=step + shift, epoch=epoch,
                       samples=take[rank * p.batch:(rank + 1) * p.batch], loss=loss_at(step))
            if step % p.ckpt_every == 0:
                path = f"/ckpt/step_{step:06d}"
                w.rank("ckpt_begin", attempt, 0, world, step=step, path=path)
                # The manager moves 'latest' onto the sealed step, then reports the commit; the harness's watch
                # judged the step whole at that moment (chaos.evidence.pointer).
                w.harness("ckpt_pointer", pointer="latest", target=f"step_{step:06d}", path=path, step=step,
                          whole=True, problems=[], hashed=True, look_s=0.001, lag_s=0.005, bytes=100)
                commit = w.rank("ckpt_commit", attempt, 0, world, step=step, path=path, bytes=100, seconds=0.1)
                committed[step] = commit
                look(attempt, "ckpt_commit", path, step)

    batches = global_batches(p, p.world, p.steps)
    begin("0.0", p.world, 0, 0, None)
    train("0.0", p.world, 1, p.fault_at, batches)
    faults: list[FaultRecord] = []
    newest = max(s for s in committed if s <= p.fault_at)
    resumed_from, corrupted = newest, None
    if p.scenario == "corrupt":
        # The newest checkpoint is damaged, then a rank is killed: the restart must reject it and load the one before.
        corrupted = committed[newest]["path"]
        t = w.tick()
        faults.append(FaultRecord(0, "corrupt-checkpoint", "corrupt-checkpoint#0", t,
                                  details={"path": corrupted, "mode": "bitflip", "trigger": "at_step"}, t_revert=t))
        resumed_from = max(s for s in committed if s < newest)
    t_fault = w.tick()
    victim = w.pid("0.0", p.world - 1)
    kind = {"hang": "hang-rank", "nan": "nan"}.get(p.scenario, "kill-rank")
    details: dict[str, Any] = {"rank": p.world - 1, "pids": [victim], "trigger": f"at_step {p.fault_at}"}
    if p.scenario == "nan":
        details = {"where": "loss", "ranks": [p.world - 1], "steps": 1, "value": math.nan,
                   "named_by": ["nonfinite", "nan"], "trigger": f"at_step {p.fault_at}"}
    fault = FaultRecord(len(faults), kind, f"{kind}#{len(faults)}", t_fault, details=details)
    faults.append(fault)
    w.harness("fault_inject", fault=fault.label, kind=kind)
    if p.scenario == "nan":
        # The rank's in-step runtime acts in the next step; the guard sees the non-finite loss before the
        # optimizer steps and every rank exits (or, with a lag, only after training poisoned steps).
        acted = p.fault_at + 1
        w.rank("instep", "0.0", p.world - 1, p.world, fault=fault.index, kind="nan", where="loss", step=acted)
        poisoned_from.append(acted)
        last = p.steps if guard_lag is None else min(p.steps, p.fault_at + guard_lag)
        if last > p.fault_at:
            train("0.0", p.world, p.fault_at + 1, last, batches)
        if guard_lag is None:
            digest = "poisoned-" + state_digest(p, p.steps, p.world)
            for rank in range(p.world):
                w.rank("final", "0.0", rank, p.world, step=p.steps, digest=digest)
            for rank in range(p.world):
                w.harness("worker_exit", worker_pid=w.pid("0.0", rank), rank=rank, node="h", attempt="0.0")
            fault.t_revert = w.t
            w.harness("pointer_watch", pointer="/ckpt/latest", state="end", polls=400, moves=len(committed),
                      max_gap_s=0.006)
            w.harness("exit", code=0, timed_out=False, wall_s=round(w.t - 1000.0, 3))
            return Truth(p, w.records, faults, golden_of(p), args, 0, None)
        w.rank("health", "0.0", p.world - 1, p.world, source="guard", code="nonfinite", device=p.world - 1,
               action="restart" if p.rollback == "restart" else "rollback", step=last + 1)
        resumed_from = max(s for s in committed if s <= last)
        if p.rollback == "in_process":
            return _roll_back_in_process(p, w, faults, committed, batches, look, train, poisoned_from,
                                         resumed_from if resume_step is None else resume_step, resume_path,
                                         cursor_shift, step_shift)
        for rank in range(p.world):
            w.harness("worker_exit", worker_pid=w.pid("0.0", rank), rank=rank, node="h", attempt="0.0")
    elif p.scenario == "hang":
        # The stopped rank stalls the collective; the peers' timeout fires and the agent tears the round down.
        w.tick(4.0)
        w.harness("worker_exit", worker_pid=w.pid("0.0", 0), rank=0, node="h", attempt="0.0")
        w.harness("worker_exit", worker_pid=victim, rank=p.world - 1, node="h", attempt="0.0")
    else:
        w.harness("worker_exit", worker_pid=victim, rank=p.world - 1, node="h", attempt="0.0")
        for rank in range(p.world - 1):
            w.harness("worker_exit", worker_pid=w.pid("0.0", rank), rank=rank, node="h", attempt="0.0")
    fault.t_revert = w.t
    if resume_step is not None:
        resumed_from = resume_step
    path = (committed[resumed_from]["path"] if resumed_from in committed else f"/ckpt/step_{resumed_from:06d}") \
        if resume_path == AUTO else resume_path
    begin("0.1", world_after, 1, resumed_from, path if resumed_from else None, reject=corrupted if reject else None)
    # The data order resumes at the global cursor of the loaded step, whatever the new world size.
    done = sum(len(take) for _, take in batches[:resumed_from]) + cursor_shift * p.batch * world_after
    rest = _batches_from(p, world_after, max(0, done), p.steps - resumed_from)
    train("0.1", world_after, resumed_from + 1, p.steps, [None] * resumed_from + rest,  # type: ignore[list-item]
          shift=step_shift)
    digest = state_digest(p, p.steps, world_after)
    if poisoned_from and resumed_from >= poisoned_from[0]:
        digest = "poisoned-" + digest  # resumed from a checkpoint saved after the fault acted: the NaN came along
    for rank in range(world_after):
        w.rank("final", "0.1", rank, world_after, step=p.steps + step_shift, digest=digest)
    for rank in range(world_after):
        w.harness("worker_exit", worker_pid=w.pid("0.1", rank), rank=rank, node="h", attempt="0.1")
    w.harness("pointer_watch", pointer="/ckpt/latest", state="end", polls=400, moves=len(committed),
              max_gap_s=0.006)
    w.harness("exit", code=0, timed_out=False, wall_s=round(w.t - 1000.0, 3))
    return Truth(p, w.records, faults, golden_of(p), args, resumed_from, corrupted)


def _roll_back_in_process(p: Params, w: "_Writer", faults: list[FaultRecord], committed: dict[int, dict[str, Any]],
                          batches: list[tuple[int, list[int]]], look: Callable[..., None], train: Callable[..., None],
                          poisoned_from: list[int], resumed_from: int, resume_path: str | None, cursor_shift: int,
                          step_shift: int) -> Truth:
    """The nan scenario's guard reloads the checkpoint of ``resumed_from`` in the same processes and trains on."""
    faults[-1].t_revert = w.t
    path = (committed[resumed_from]["path"] if resumed_from in committed else f"/ckpt/step_{resumed_from:06d}") \
        if resume_path == AUTO else resume_path
    for rank in range(p.world):
        w.rank("ckpt_load", "0.0", rank, p.world, step=resumed_from, path=path)
    if path:
        look("0.0", "ckpt_load", path, resumed_from, reloaded=True)
    tainted = resumed_from >= poisoned_from[0]
    if not tainted:
        poisoned_from.clear()  # what this process commits from here on was trained from the clean checkpoint
    done = sum(len(take) for _, take in batches[:resumed_from]) + cursor_shift * p.batch * p.world
    rest = _batches_from(p, p.world, max(0, done), p.steps - resumed_from)
    train("0.0", p.world, resumed_from + 1, p.steps, [None] * resumed_from + rest, shift=step_shift)  # type: ignore[list-item]
    digest = ("poisoned-" if tainted else "") + state_digest(p, p.steps, p.world)
    for rank in range(p.world):
        w.rank("final", "0.0", rank, p.world, step=p.steps + step_shift, digest=digest)
    for rank in range(p.world):
        w.harness("worker_exit", worker_pid=w.pid("0.0", rank), rank=rank, node="h", attempt="0.0")
    w.harness("pointer_watch", pointer="/ckpt/latest", state="end", polls=400, moves=len(committed),
              max_gap_s=0.006)
    w.harness("exit", code=0, timed_out=False, wall_s=round(w.t - 1000.0, 3))
    return Truth(p, w.records, faults, golden_of(p), {"steps": p.steps, "ckpt_every": p.ckpt_every, "seed": p.seed},
                 resumed_from, None)


def _batches_from(p: Params, world: int, consumed: int, steps: int) -> list[tuple[int, list[int]]]:
    """``steps`` global batches for ``world`` ranks, starting at the global cursor ``consumed``."""
    out = []
    epoch, offset = divmod(consumed, p.dataset)
    for _ in range(steps):
        take = order(p, epoch)[offset:offset + p.batch * world]
        out.append((epoch + p.epoch_base, take))
        offset += len(take)
        if offset >= p.dataset:
            epoch, offset = epoch + 1, 0
    return out


def golden_of(p: Params) -> dict[str, Any]:
    """The fault-free run's summary, as ``chaos.run.golden`` caches it: same world size, same steps, same order."""
    batches = global_batches(p, p.world, p.steps)
    epoch_samples: dict[str, list[list[int]]] = {}
    for epoch, take in batches:
        epoch_samples.setdefault(str(epoch), []).append(take)
    digest = state_digest(p, p.steps, p.world)
    return {"ranks": {str(r): {"digest": digest, "step": p.steps} for r in range(p.world)}, "world_size": p.world,
            "final_step": p.steps, "final_loss": loss_at(p.steps), "epoch_samples": epoch_samples,
            "dataset_size": p.dataset, "run_dir": "/golden",
            "ckpt_digests": {str(s): state_digest(p, s, p.world) for s in range(p.ckpt_every, p.steps + 1, p.ckpt_every)}}


CONFIGS: dict[str, dict[str, Any]] = {
    "completes": {"max_restarts": 1, "min_restarts": 1},
    "recovery_time": {"metric": "resume_s", "max_s": 60},
    "detection": {"max_s": 30, "faults": ["hang-rank"]},
    "exactly_once": {},
    "checkpoint_integrity": {},
    "matches_golden": {},
    "replicas_agree": {},
    "goodput": {"min": 0.05},
    "no_corrupt_commit": {"golden_digests": True},
    "rolled_back": {},
    "pointer_durable": {},
}
"""The checks a truth must PASS, with the config each is judged under (the rest need other evidence)."""


def checks_for(p: Params) -> dict[str, dict[str, Any]]:
    """The checks that apply to this scenario."""
    out = dict(CONFIGS)
    if p.scenario == "nan":  # caught by the guard in the step it acted in, nobody left waiting
        out["detection"] = {"max_s": 30, "max_steps": 0, "faults": ["nan"]}
    elif p.scenario != "hang":
        out.pop("detection")
    if p.scenario != "nan":
        out.pop("rolled_back")  # judges in-step faults only
    elif p.rollback == "in_process":  # no restart: nothing for a restart's figures to time
        out["completes"] = {"max_restarts": 0, "min_restarts": 0}
        out.pop("recovery_time")
    if p.scenario == "resize":  # digests cannot match: the experiment opts into the final-loss standard
        out["matches_golden"] = {"world_size_change": "final_loss"}
        out["no_corrupt_commit"] = {}  # nor can the checkpoints after the resize
    return out


Mutation = Callable[[Truth], Truth | None]
