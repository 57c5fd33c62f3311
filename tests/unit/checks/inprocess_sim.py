"""A simulated NVRx in-process restart for restarted_in_process's tests (imported, not a conftest).

Two ranks (pids 100, 101 on host "h", attempt 0.0) step every 0.1 s. At FAULT_T rank 1 raises; the wrapper restarts
both inside their own processes: each reports ``inprocess_restart`` (iteration 1) ``restart`` s later, reloads the
checkpoint of step 20 and trains steps 21..40 again. A process is (host, pid), as the harness names it: the node it
spawned a worker on is the host the worker's records carry (CHAOS_HOST)."""

from __future__ import annotations

import copy
from typing import Any

from histsim import make_outcome

from chaos.checks.base import FaultRecord
from chaos.evidence.events import History
from chaos.registry import CHECKS

FAULT_T = 1000.0
PIDS = {0: 100, 1: 101}


def R(ev: str, t: float, r: int, pid: int, host: str = "h", attempt: str = "0.0", ws: int = 2, **f: Any) -> dict:
    """A workload record of rank ``r`` from process ``pid`` on ``host``."""
    return {"ev": ev, "t": t, "mono": t, "pid": pid, "host": host, "rank": r, "world_size": ws, "attempt": attempt, **f}


def H(ev: str, t: float, **f: Any) -> dict:
    """A harness record (worker_spawn, worker_exit)."""
    return {"ev": ev, "t": t, "mono": t, "pid": 1, "host": "h", "source": "harness", **f}


def job(restart: float = 9.0, node: str = "h") -> tuple[list[dict[str, Any]], list[FaultRecord]]:
    """(records, faults) of the truth."""
    recs: list[dict[str, Any]] = []
    t0 = FAULT_T - 3.0
    for r, pid in PIDS.items():
        recs.append(H("worker_spawn", t0 - 1.0, worker_pid=pid, rank=r, node=node, attempt="0.0", generation=1))
        recs.append(R("start", t0 - 0.5, r, pid, local_rank=r, device="cpu", dataset_size=100))
    for s in range(1, 26):
        for r, pid in PIDS.items():
            recs.append(R("step", t0 + s * 0.1, r, pid, step=s, epoch=0, samples=[2 * s + r], loss=1.0))
    back = FAULT_T + restart
    for r, pid in PIDS.items():
        recs.append(R("inprocess_restart", back, r, pid, source="nvrx", iteration=1,
                      cause="RuntimeError: collective failed"))
        recs.append(R("ckpt_load", back + 0.1, r, pid, step=20, path="/ckpt/step_20"))
        for s in range(21, 41):
            recs.append(R("step", back + 0.1 + (s - 20) * 0.1, r, pid, step=s, epoch=0, samples=[2 * s + r], loss=1.0))
        recs.append(R("final", back + 2.5, r, pid, step=40, digest="a" * 64))
    recs.sort(key=lambda r: r["t"])
    fault = FaultRecord(0, "collective-error", "collective-error#0", FAULT_T,
                        details={"ranks": [1], "attempt": "0.0"}, t_revert=FAULT_T)
    return recs, [fault]


def verdict(records: list[dict[str, Any]], faults: list[FaultRecord], align: bool = False,
            judged: list[str] | None = None, **config: Any) -> Any:
    """The check's verdict on the history (aligned to the harness's rounds with ``align``, as a real run's is);
    ``judged``: the check's own ``faults`` setting (the fault kinds it judges)."""
    cls = CHECKS.get("restarted_in_process")
    if judged is not None:
        config["faults"] = judged
    h = History([dict(r) for r in records])
    if align:
        h.align_attempts()
    return cls(cls.Config.model_validate(config)).evaluate(make_outcome(h, faults=copy.deepcopy(faults)))
