"""What a run ended with, as a golden comparison reads it: each rank's final digest and step, the last
step's loss, the world size, and the order the run consumed its dataset in.

The same summary is made of the fault-free (golden) run, which chaos.run.golden runs and caches, and
read by matches_golden and exactly_once; it is a pure function of a history.
"""

from __future__ import annotations

import math
from typing import Any

from chaos.evidence.lineage import LineageError, rebuild_lineage
from chaos.evidence.records import attempt_key


def summarize_finals(history: Any) -> dict[str, Any]:
    """What a golden comparison needs: final digest and step per rank, and the last losses."""
    finals = history.finals()
    attempt = history.final_attempt()
    per_rank = {str(r.get("rank")): {"digest": r.get("digest"), "step": r.get("step")}
                for r in finals if str(r.get("attempt")) == attempt}
    last_step = history.end_step(attempt) if attempt is not None else 0
    # The last step's losses: the final attempt's own, or (when it only loaded its last checkpoint and
    # trained nothing) those of the latest attempt that ran that step.
    at_last = [r for r in history.of("step") if r.get("step") == last_step and r.source != "output"]
    latest = max((str(r.get("attempt")) for r in at_last), key=attempt_key, default=None)
    at_last = [r for r in at_last if str(r.get("attempt")) == latest]
    final_loss, problem = _loss_at(at_last, last_step)
    # The world size the job ended with: the final attempt's, not the largest any attempt had.
    world = max((int(r.get("world_size", 1)) for r in finals if str(r.get("attempt")) == attempt), default=0)
    return {"ranks": per_rank, "world_size": world, "final_step": last_step, "final_loss": final_loss,
            "final_loss_problem": problem}


def finite_number(value: Any) -> bool:
    """A real, finite number: not NaN or infinite, not null, not a bool or a string."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _loss_at(steps: list[Any], step: int) -> tuple[float | None, str | None]:
    """The mean loss of a step's records, and what is wrong with it: a non-finite or non-numeric value
    (a diverged run; a NaN a strict encoder wrote as null) is named, never averaged or compared.
    A step that reports no loss at all has none (None, None)."""
    reported = [(r.get("rank"), r.get("loss")) for r in steps if "loss" in r]
    bad = [(rank, loss) for rank, loss in reported if not finite_number(loss)]
    if bad:
        listing = ", ".join(f"rank {rank}: {'null' if loss is None else repr(loss)}" for rank, loss in bad[:4])
        return None, f"the loss of step {step} is not a finite number ({listing})"
    if not reported:
        return None, None
    return sum(float(loss) for _, loss in reported) / len(reported), None


def summarize_golden(history: Any) -> dict[str, Any]:
    """The fault-free run's summary: its finals, and the order it consumed the dataset in (for exactly_once)."""
    return {**summarize_finals(history), "dataset_size": history.dataset_size(),
            "epoch_samples": epoch_samples(history), "ckpt_digests": checkpoint_digests(history)}


def checkpoint_digests(history: Any) -> dict[str, str]:
    """Step -> digest of each checkpoint the run committed, as the witness scanned it whole at commit
    (chaos.checkpoint.values): what a deterministic run's checkpoint at that step must equal."""
    out: dict[str, str] = {}
    for r in history.of("ckpt_verify"):
        values = r.get("values")
        if r.get("seen") == "ckpt_commit" and isinstance(values, dict) and values.get("digest") \
                and not values.get("unscanned") and isinstance(r.get("step"), int):
            out.setdefault(str(r["step"]), str(values["digest"]))
    return out


def epoch_samples(history: Any) -> dict[str, list[list[int]]] | None:
    """Per epoch (keys are JSON strings), each kept step's global sample set (union over ranks), in step order.

    What exactly_once compares a faulted run's per-epoch consumption with. None when the run's
    steps do not all say which samples they consumed.
    """
    try:
        kept = [r for _, r in rebuild_lineage(history).kept_steps() if r.get("source") != "output"]
    except LineageError:
        return None
    if not kept or any(not isinstance(r.get("samples"), list) for r in kept):
        return None
    steps: dict[int, tuple[int, set[int]]] = {}
    for r in kept:
        epoch, union = steps.setdefault(int(r["step"]), (int(r.get("epoch", 0)), set()))
        union.update(int(i) for i in r["samples"])
    out: dict[str, list[list[int]]] = {}
    for step in sorted(steps):
        epoch, union = steps[step]
        out.setdefault(str(epoch), []).append(sorted(union))
    return out
