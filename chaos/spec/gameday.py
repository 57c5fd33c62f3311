"""A game day: a published failure mix played, seeded and time-compressed, over one long training run.

An experiment carries it as a ``gameday:`` section. The fault process is a Poisson process per root
cause, at the cause's published rate scaled to the cluster the game day stands for (``gpus``); the
``span_days`` it stands for are played in ``window_s`` seconds of the run. The draw is seeded by the
experiment's seed, so ``--dry-run`` prints exactly the faults a run would inject, and two runs of
the same plan meet the same faults at the same moments.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from chaos.spec.configs import StrictConfig
from chaos.spec.mixes import CATEGORIES, MIXES, Mix, play_cause

MAX_FAULTS = 500


class CategoryConfig(StrictConfig):
    """How one category of the mix is played in this game day."""

    fault: dict[str, Any] | None = None
    """A fault (kind and fields, no trigger) that replaces the target's default for this category."""
    scale: float = Field(default=1.0, ge=0, le=1000)
    """Multiply the category's published rate; 0 leaves the category out."""


class StopConfig(StrictConfig):
    """Conditions that end a game day early, each with its reason in the report."""

    no_progress_s: float | None = Field(default=180.0, gt=0, le=7 * 24 * 3600)
    """End when no rank has reported a new step for this long (unset: only timeout_s ends it)."""
    max_restarts: int | None = Field(default=None, ge=0, le=100000)
    """End when the job has restarted more often than this."""


class GamedayConfig(StrictConfig):
    """A seeded, time-compressed failure mix (``gameday:`` in an experiment file)."""

    mix: str = "llama3-405b"
    """The published failure mix to play (``chaos list mixes``)."""
    gpus: int = Field(ge=1, le=10_000_000)
    """The cluster the game day stands for: rates are the mix's per-GPU rates times this many GPUs."""
    span_days: float | None = Field(default=None, gt=0, le=3650)
    """Days of that cluster's life the game day plays (default: the span of the mix)."""
    window_s: float = Field(gt=0, le=30 * 24 * 3600)
    """Seconds of this run over which the span is played: the time compression is span / window."""
    start_after_s: float = Field(default=15.0, ge=0, le=24 * 3600)
    """No fault comes due before this many seconds (start-up, the first checkpoint)."""
    min_gap_s: float = Field(default=3.0, ge=0, le=3600)
    """Faults that come due together strike at least this far apart, each once the job trains again, so the
    report can charge each one its own cost (the draw itself stays a Poisson process)."""
    wait_for_groups_s: float | None = Field(default=None, gt=0, le=24 * 3600)
    """A drop-replica job (target torchft) only: a fault that comes due while a replica group is still coming back
    from an earlier one waits until every group has committed a step since that fault, up to this many seconds past
    its due time, then strikes (never skipped; its record's ``delayed`` says how long and why). Unset: faults strike at
    their due time whatever groups are away, and the box's relaunch time decides whether one takes the last group
    holding the state."""
    categories: dict[str, CategoryConfig] = Field(default_factory=dict)
    """Per category (gpu, hbm, network, software, maintenance, host): another fault, or a rate scale."""
    stop: StopConfig = Field(default_factory=StopConfig)
    """When to end the game day before the workload finishes."""
    project_gpus: list[int] = Field(default_factory=list, max_length=20)
    """Cluster sizes to project goodput to (default: gpus, the mix's own cluster, and 131,072)."""
    project_save_s: float | None = Field(default=None, gt=0, le=24 * 3600)
    """Project with this save stall instead of the one measured here (your real model's checkpoint time)."""
    project_restart_s: float | None = Field(default=None, gt=0, le=24 * 3600)
    """Project with this cost per interruption instead of the one measured here (your real restart time)."""

    def projection_sizes(self) -> list[int]:
        return sorted(set(self.project_gpus or [self.gpus, self.the_mix.gpus, 131072]))

    @model_validator(mode="after")
    def _known(self) -> "GamedayConfig":
        if self.mix not in MIXES:
            raise ValueError(f"unknown mix '{self.mix}'; known: {', '.join(MIXES)}")
        for name in self.categories:
            if name not in CATEGORIES:
                raise ValueError(f"unknown category '{name}'; known: {', '.join(CATEGORIES)}")
        if self.expected_faults() > MAX_FAULTS:
            raise ValueError(f"the plan expects {self.expected_faults():.0f} faults (more than {MAX_FAULTS}): lower "
                             f"gpus or span_days")
        return self

    @property
    def the_mix(self) -> Mix:
        return MIXES[self.mix]

    @property
    def span_h(self) -> float:
        return (self.span_days if self.span_days is not None else self.the_mix.span_days) * 24.0

    @property
    def compression(self) -> float:
        """Real seconds of the cluster's life per second of this run."""
        return self.span_h * 3600.0 / self.window_s

    def scale_of(self, category: str) -> float:
        cfg = self.categories.get(category)
        return cfg.scale if cfg is not None else 1.0

    def expected_faults(self) -> float:
        mix = self.the_mix
        return sum(mix.rate_per_gpu_hour(c) * self.gpus * self.span_h * self.scale_of(c.category) for c in mix.causes)


@dataclass
class Scheduled:
    """One drawn fault: when in the run, when in the life of the cluster it stands for, and what."""

    at_s: float
    real_h: float
    cause: str
    category: str
    fault: dict[str, Any]
    """The fault mapping as an experiment file would hold it, trigger included."""
    why: str
    overridden: bool = False

    @property
    def label(self) -> str:
        return str(self.fault.get("name"))


def draw(plan: GamedayConfig, seed: int, target_kind: str, *, nproc_per_node: int = 1,
         nodes: int = 1, elastic: bool = False, min_nodes: int | None = None) -> list[Scheduled]:
    """The faults of ``plan`` in order of their due time. Same plan and seed, same schedule.

    A drawn rank is one that exists whatever nodes an elastic job has lost by then: below
    ``nproc_per_node * min_nodes`` (ranks are renumbered from 0 after each rendezvous)."""
    rng = random.Random(f"gameday:{seed}")
    mix = plan.the_mix
    drawn: list[tuple[float, str, str]] = []
    for cause in mix.causes:  # one Poisson process per root cause, in table order (stable for the seed)
        rate_h = mix.rate_per_gpu_hour(cause) * plan.gpus * plan.scale_of(cause.category)
        if rate_h <= 0:
            continue
        t = 0.0
        while True:
            t += rng.expovariate(rate_h)
            if t > plan.span_h or len(drawn) > MAX_FAULTS:
                break
            drawn.append((t, cause.name, cause.category))
    drawn.sort()
    out: list[Scheduled] = []
    for i, (real_h, cause, category) in enumerate(drawn):
        default = play_cause(cause, category, target_kind, elastic=elastic)
        override = plan.categories.get(category)
        template = dict(override.fault) if override is not None and override.fault else dict(default.fault)
        if not (override is not None and override.fault):
            if "device" in default.draws:
                template["device"] = rng.randrange(max(1, nproc_per_node))
            if "node" in default.draws:
                template["node"] = rng.randrange(1, nodes) if nodes > 1 else 0
            if "group" in default.draws:  # a torchft replica group, by its node's name
                template["node"] = f"rg{rng.randrange(max(1, nodes))}"
            if "rank" in default.draws:
                alive = min_nodes if elastic and min_nodes else nodes
                template["rank"] = rng.randrange(max(1, nproc_per_node * alive))
        at_s = plan.start_after_s + real_h / plan.span_h * plan.window_s
        template["name"] = f"{category}#{i + 1}"
        template["optional"] = True  # due after the workload ended: not reached (the gameday check counts them)
        trigger: dict[str, Any] = {"after_s": round(at_s, 2), "gap_s": plan.min_gap_s}
        if plan.wait_for_groups_s is not None and target_kind == "torchft":  # a torchft job's nodes are its groups
            trigger.update(groups=max(1, nodes), groups_wait_s=plan.wait_for_groups_s)
        template["trigger"] = {"in_training": trigger}
        out.append(Scheduled(at_s=at_s, real_h=real_h, cause=cause, category=category, fault=template,
                             why="set in the plan" if override is not None and override.fault else default.why,
                             overridden=bool(override is not None and override.fault)))
    return out


def describe(plan: GamedayConfig, schedule: list[Scheduled], target_kind: str) -> list[str]:
    """The schedule as a reader checks it before a game day: the scale, the compression, every fault."""
    mix = plan.the_mix
    lines = [
        f"mix {mix.name}: {mix.source}",
        f"played at {plan.gpus} GPUs over {plan.span_h / 24:g} days of cluster time, compressed into "
        f"{plan.window_s:g} s of this run (1 s here = {_human(plan.compression)} there), from {plan.start_after_s:g} s",
        f"expected {plan.expected_faults():.1f} faults; drawn {len(schedule)} (seeded):",
    ]
    if plan.wait_for_groups_s is not None and target_kind == "torchft":
        lines.append(f"each fault strikes once every replica group has committed a step since the previous one (a lost "
                     f"group back), at most {plan.wait_for_groups_s:g} s past its due time")
    for s in schedule:
        fields = {k: v for k, v in s.fault.items() if k not in ("name", "optional", "trigger")}
        lines.append(f"  {s.at_s:8.1f} s  (day {s.real_h / 24:6.2f})  {s.label:<14} {s.cause:<30} {_compact(fields)}")
    # One line per way a category is played (a cause with a play of its own, such as silent data corruption, adds one).
    seen = sorted({(s.category, s.why) for s in schedule})
    for category, why in seen:
        lines.append(f"  {category} on {target_kind}: {why}")
    return lines


def _compact(fields: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in fields.items())


def _human(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"

