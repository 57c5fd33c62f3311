"""The relaunch policy the runner consults when a launch ends: devices excluded during it are left out of the next one.

torchrun cannot shrink ``--nproc-per-node`` of a running single-node job, so the harness plays the
scheduler: it starts a new launch (``CHAOS_LAUNCH`` + 1) with one rank fewer per excluded device and
``CUDA_VISIBLE_DEVICES`` without them; the workload resumes from its checkpoint, and its sampler
cursor, being independent of the world size, keeps every sample exactly once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from chaos.runtime.context import RunContext
from chaos.health.exclusions import exclusions_path, read_exclusions
from chaos.health.monitor import visible_devices


@dataclass(frozen=True)
class Relaunch:
    """The next launch's shape."""

    nproc_per_node: int
    visible: list[int]
    excluded: list[dict[str, Any]]
    """The exclusions recorded during the launch that just ended."""


def current_visible(run: RunContext) -> list[int]:
    env = {**run.experiment.workload.env, **run.workload_env}
    return visible_devices(env) or list(range(run.experiment.workload.nproc_per_node))


def next_launch(run: RunContext, exit_code: int) -> Relaunch | None:
    """A smaller launch when the one that ended excluded a device and stopped for it; None otherwise."""
    if exit_code == 0 or run.target is None or run.target.node_count != 1:
        return None
    recorded = read_exclusions(exclusions_path(run.run_dir))
    new = [e for e in recorded if str(e.get("attempt", "")).split(".")[0] == str(run.launch_no)]
    if not new:
        return None
    bad = {e.get("device") for e in recorded}
    visible = current_visible(run)
    remaining = [d for d in visible if d not in bad]
    if not remaining or len(remaining) == len(visible):
        return None
    return Relaunch(len(remaining), remaining, new)


def relaunch(run: RunContext, change: Relaunch) -> None:
    """Start the next launch in ``change``'s shape (the target's nodes are replaced)."""
    workload = run.experiment.workload.model_copy(update={"nproc_per_node": change.nproc_per_node})
    run.experiment = dataclasses.replace(run.experiment, workload=workload)
    run.workload_env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, change.visible))
    run.launch_no += 1
    run.log("launch", launch=run.launch_no, target=run.experiment.target_kind, nodes=run.target.node_count,
            experiment=run.experiment.name, nproc_per_node=change.nproc_per_node, visible_devices=change.visible,
            excluded=[e.get("device") for e in change.excluded], reason="devices excluded by the health monitor")
    run.target.launch(run)  # type: ignore[union-attr]
