"""Baselines: the figures of known-good runs, and the rule that says a new run regressed against them.

A pass/fail suite cannot see a change that makes recovery slower or saves heavier. A baseline keeps,
per experiment, every value each figure took over the baseline's repeats (recovery figures per
fault, checkpoint save seconds and bytes, wall time); a later run's median regresses only when it
exceeds the baseline's median by more than the largest of a relative margin, an absolute floor and
the spread the baseline itself showed, so a noisy 2-core runner does not fail a pull request on
jitter. Every figure here is "lower is better".

Only what the stack did is gated: ``lost_steps`` counts the steps lost beyond the newest checkpoint
that was durable when the fault acted (0 for a correct stack, wherever the fault landed). Where the
fault landed (``landed_step``, ``steps_since_ckpt``) depends on the trigger's timing and is reported
in journal.json, never gated. An experiment the baseline has no entry for fails the gate unless the
caller accepts new experiments (``chaos run --allow-new``): a renamed experiment must not silently
stop being gated.

Timing figures are compared at the baseline's host speed. A shared runner's speed drifts by a third
within an hour and halves when another job takes a core; restarts and resumes (interpreter and torch
start-up) move with it, so a baseline made in a fast hour failed unchanged code in a slow one (issue
39). Each run records ``chaos.runtime.host_speed.probe_s`` around it; every timing figure (``*_s``) of a run
is scaled by the baseline's median probe over the run's own (at most 1.5x either way, so a broken
probe cannot hide a regression of more than that), the baseline's runs as well as the new ones.
Steps and bytes are never scaled. A baseline or run without the probe is compared as measured, and
the comparison says so.

Only what the host's speed moves is scaled (issue 56): a hang's ``detect_s`` is the collective's timeout,
``requeue_s`` Slurm's scheduling and a timed fault's held time (its ``duration_s``, inside ``wall_s``) the
experiment's own; scaled up on a faster host, unchanged code measured faster than its baseline FAILed, and
scaled down on a slower one, a longer timeout passed. Those, and any timing figure not classified here, are
compared as measured, and the comparison names them. Scaling may excuse a slower host and never condemn a
faster one: a figure within its bound as measured is no regression whatever the probe says.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import UsageError
from chaos.report.journal import Journal, read_journals

__all__ = ["Comparison", "FigureChange", "SCALED", "UNSCALED", "absent", "bound_for", "build_baseline",
           "by_experiment", "compare", "figures_of", "is_timing", "load_baseline", "markdown_summary", "read_journals",
           "scales", "speed_of", "speed_scale"]

VERSION = 1
RECOVERY = ("detect_s", "restart_s", "resume_s", "regain_s", "lost_steps", "requeue_s")
SCALED = frozenset({"restart_s", "resume_s", "regain_s", "badput_s", "save_s", "wall_s"})
"""Timing figures (by metric: the name's last part) that the host's speed moves, scaled: interpreter and torch
start-up, checkpoint loads and saves, recomputed steps (issue 39). The recovery figures count from the fault, so a
wait before detection is in them too; a longer wait is caught on ``detect_s``, compared as measured. ``wall_s``
is scaled less its faults' held time (``_held_s``)."""
UNSCALED = frozenset({"detect_s", "requeue_s"})
"""Timing figures that are waits set by a timeout or a scheduler, not by the host's speed: compared as measured.
``detect_s`` is a collective's timeout, the agent's monitor interval or a health check's period; ``requeue_s`` is
Slurm's scheduling. A timing figure in neither set is compared as measured too: scaling an unknown figure could
only hide (slower host) or invent (faster host) a regression."""
ABS_FLOOR = {"s": 1.0, "lost_steps": 1.0, "save_s": 0.25, "bytes": 0.0}
"""Differences below these are never a regression: scheduling jitter and fsync stalls on a shared runner; for
lost_steps, one step (a correct stack loses none whatever the fault's timing, so a resume from an older
checkpoint than the newest durable one, two or more steps back, is caught)."""
MEANING = {"lost_steps": "beyond_durable_checkpoint"}
"""What a baseline's figures mean, where that changed: a baseline without this key was saved when lost_steps
counted every step run again after the fault (the fault's timing included)."""
REL_MARGIN = 0.25
"""A median may grow by this fraction of the baseline's before it counts."""
MAX_SPEED_SCALE = 1.5
"""The most a timing figure is scaled for host speed, either way. On the 2-core box a busy process beside
the run made the probe 1.6-1.8x slower but the run's timings only 1.2-1.35x (ci/bench/gate_noise.py): a
CPU hog slows fixed work more than a job that also waits on sockets and disks. Beyond 1.5x the scaling
would loosen the gate more than the slowdown it corrects; it also bounds what a lying probe can hide."""


def figures_of(journal: Journal) -> dict[str, float]:
    """The comparable figures of one run's journal, flat: ``kill-rank#0.resume_s``, ``ckpt.save_s``, ``wall_s``."""
    out: dict[str, float] = {"wall_s": float(journal.wall_s)}
    for fault in journal.faults:
        for metric in RECOVERY:
            value = fault.recovery.get(metric)
            if isinstance(value, (int, float)):
                out[f"{fault.label}.{metric}"] = float(value)
    split = journal.goodput or {}
    if not split.get("problems") and isinstance(split.get("wall_s"), (int, float)) and split.get("seconds"):
        # Everything but new training: detection, restarts, loads, recomputation, saves, slow steps.
        out["badput_s"] = float(split["wall_s"]) - float(split["seconds"].get("productive", 0.0))
    if journal.checkpoints.save_s_median is not None:
        out["ckpt.save_s"] = float(journal.checkpoints.save_s_median)
    if journal.checkpoints.bytes_median is not None:
        out["ckpt.bytes"] = float(journal.checkpoints.bytes_median)
    return out


def speed_of(journal: Journal) -> float | None:
    """The run's host-speed probe (chaos.runtime.host_speed.probe_s, seconds: higher is slower), None if not measured."""
    value = journal.host_speed.get("probe_s")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def is_timing(figure: str) -> bool:
    """A figure in seconds (not steps, not bytes); whether the host's speed moves it is ``scales``."""
    return figure.endswith("_s")


def scales(figure: str) -> bool:
    """A timing figure the host's speed moves (``SCALED``); waits and figures not classified are not scaled."""
    return is_timing(figure) and figure.rsplit(".", 1)[-1] in SCALED


def _held_s(journal: Journal) -> float:
    """Seconds of the run that timed faults held (injection to release, overlaps counted once): the
    experiment's ``duration_s``, the same on any host, so the part of ``wall_s`` that is never scaled."""
    spans = sorted((f.t_inject, f.t_release) for f in journal.faults
                   if isinstance(f.t_inject, (int, float)) and isinstance(f.t_release, (int, float))
                   and f.t_release > f.t_inject)
    held, end = 0.0, float("-inf")
    for start, stop in spans:
        held += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return min(held, float(journal.wall_s))


def speed_scale(reference: float, probe: float) -> float:
    """The factor that brings a timing figure measured at ``probe`` to the ``reference`` speed, bounded."""
    return min(MAX_SPEED_SCALE, max(1 / MAX_SPEED_SCALE, reference / probe))


def _at_speed(figures: dict[str, float], scale: float, held_s: float = 0.0) -> dict[str, float]:
    """The figures with what the host's speed moves scaled; ``wall_s`` keeps its faults' held time as measured."""
    out = {}
    for name, value in figures.items():
        fixed = min(held_s, value) if name == "wall_s" else 0.0
        out[name] = fixed + (value - fixed) * scale if scales(name) else value
    return out


def build_baseline(journals: list[Journal]) -> dict[str, Any]:
    """Group runs by experiment; only passing runs make a baseline (a failed run's figures prove nothing)."""
    passing: dict[str, list[Journal]] = {}
    for j in journals:
        if j.exit_code == 0 and not j.experiment.endswith("-golden"):
            passing.setdefault(j.experiment, []).append(j)
    if not passing:
        raise UsageError("none of those runs passed: a baseline is made from passing runs only")
    experiments: dict[str, Any] = {}
    for name, runs in passing.items():
        measured = [figures_of(j) for j in runs]
        entry = experiments[name] = {"runs": [str(j.folder) for j in runs], "figures": _columns(measured)}
        speeds = [speed_of(j) for j in runs]
        if all(speeds):
            # The figures again, each run's timings at the baseline's median host speed; kept beside the
            # figures as measured so an old reader and a run without the probe still have those.
            reference = statistics.median(speeds)  # type: ignore[type-var]
            entry["host_probe_s"] = speeds
            entry["host_reference_s"] = round(reference, 4)
            entry["at_reference_speed"] = _columns([
                _at_speed(f, speed_scale(reference, s), _held_s(j))  # type: ignore[arg-type]
                for f, s, j in zip(measured, speeds, runs)])
    return {"version": VERSION, "meaning": dict(MEANING), "experiments": experiments}


def _columns(rows: list[dict[str, float]]) -> dict[str, list[float]]:
    """Per figure, its values over the runs that produced it, in run order."""
    out: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.items():
            out.setdefault(name, []).append(value)
    return out


def load_baseline(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"no baseline at {path}: make one with 'chaos baseline save RUNS... -o {path}'") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable baseline ({exc}); make a new one with 'chaos baseline save'") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("experiments"), dict):
        raise UsageError(f"{path}: not a chaos baseline of version {VERSION}; make a new one with 'chaos baseline save'")
    return data


@dataclass
class FigureChange:
    """One figure of one experiment, now against the baseline."""

    figure: str
    now: float
    base: float
    bound: float
    runs: int
    base_runs: int
    measured: float | None = None
    """The median as measured, where ``now`` is scaled to the baseline's host speed (timing figures)."""
    measured_bound: float | None = None
    """Where ``now`` is scaled: the bound of the baseline's figures as measured."""

    @property
    def regressed(self) -> bool:
        # Scaling may only excuse: on a faster host it multiplies a figure up, and a figure within its bound
        # as measured, scaled over it, is the probe's verdict on the host, not a change in the code (issue 56).
        return self.now > self.bound and not self.within_as_measured

    @property
    def within_as_measured(self) -> bool:
        """Scaled, the figure is over its bound; as measured, within the baseline's: no regression."""
        return (self.measured is not None and self.measured_bound is not None
                and self.measured <= self.measured_bound)

    @property
    def change(self) -> str:
        """The relative change, for people: ``+12 %``, or ``new`` against a zero baseline."""
        return f"{(self.now - self.base) / self.base * 100:+.0f} %" if self.base else "new"

    def describe(self) -> str:
        measured = (f", {_fmt(self.measured)} as measured" if self.measured is not None
                    and _fmt(self.measured) != _fmt(self.now) else "")
        return (f"{self.figure} {_fmt(self.now)} vs baseline {_fmt(self.base)} ({self.change}, bound "
                f"{_fmt(self.bound)}; median of {self.runs} run(s) vs {self.base_runs}{measured})")


@dataclass
class Comparison:
    experiment: str
    baseline_runs: list[str]
    changes: list[FigureChange] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Baseline figures this run did not produce (a fault that no longer fired, a recovery that never came)."""
    stale: list[str] = field(default_factory=list)
    """Figures of a baseline saved before their meaning changed that this run could not produce (the old
    lost_steps of a workload that reports no ckpt_commit): not compared, not a failure; re-save the baseline."""
    absent: bool = False
    """The baseline has no entry for this experiment: none of its figures were gated."""
    allow_new: bool = False
    """An absent experiment is accepted (``--allow-new``) instead of failing the gate."""
    speed: str = ""
    """How the timing figures were compared: at the baseline's host speed (and how much slower or faster
    this host was, and which figures were compared as measured all the same), or as measured and why."""
    as_measured: list[str] = field(default_factory=list)
    """Timing figures compared as measured although the rest were scaled: waits, and figures not classified."""

    @property
    def regressions(self) -> list[FigureChange]:
        return [c for c in self.changes if c.regressed]

    @property
    def failed(self) -> bool:
        """A figure regressed, one the baseline has was not produced, or the experiment is not in the
        baseline at all (unless new experiments are allowed): each fails the gate."""
        return bool(self.regressions or self.missing or (self.absent and not self.allow_new))

    def absent_message(self, baseline_path: str = "FILE") -> str:
        """Why an experiment absent from the baseline was not gated, and the ways out."""
        verdict = "accepted (--allow-new)" if self.allow_new else "this fails the gate"
        return (f"no baseline for {self.experiment} in {baseline_path}: its figures were not gated; {verdict}. "
                f"Add it with 'chaos baseline save RUNS... -o {baseline_path}' (passing runs of {self.experiment}, "
                f"with the experiments already in it), or pass --allow-new to accept experiments absent from the "
                f"baseline")


def by_experiment(journals: list[Journal]) -> dict[str, list[Journal]]:
    """Journals grouped by experiment name, in the order given."""
    out: dict[str, list[Journal]] = {}
    for j in journals:
        out.setdefault(j.experiment, []).append(j)
    return out


def _floor(figure: str) -> float:
    metric = figure.rsplit(".", 1)[-1]
    if metric == "lost_steps":
        return ABS_FLOOR["lost_steps"]
    if figure == "ckpt.save_s":
        return ABS_FLOOR["save_s"]
    if figure == "ckpt.bytes":
        return ABS_FLOOR["bytes"]
    return ABS_FLOOR["s"]


def bound_for(figure: str, base_values: list[float], rel: float = REL_MARGIN) -> float:
    """The largest median that is not a regression: baseline median plus its margin, floor or spread."""
    base = statistics.median(base_values)
    spread = max(base_values) - min(base_values)
    return base + max(rel * abs(base), _floor(figure), spread)


def absent(experiment: str, allow_new: bool = False) -> Comparison:
    """The verdict for an experiment the baseline has no entry for: nothing compared, a failure unless allowed."""
    return Comparison(experiment, [], absent=True, allow_new=allow_new)


def compare(experiment: str, journals: list[Journal], baseline: dict[str, Any],
            rel: float = REL_MARGIN) -> Comparison | None:
    """This experiment's runs against its baseline entry (None when the baseline has none: see ``absent``)."""
    entry = baseline["experiments"].get(experiment)
    if entry is None:
        return None
    old_meaning = {name for name, meaning in MEANING.items() if (baseline.get("meaning") or {}).get(name) != meaning}
    speeds = [speed_of(j) for j in journals]
    reference = entry.get("host_reference_s")
    scaled = isinstance(reference, (int, float)) and "at_reference_speed" in entry and all(speeds)
    base_figures = entry["at_reference_speed"] if scaled else entry["figures"]
    rows = [figures_of(j) for j in journals]
    measured = _columns(rows)
    held = [_held_s(j) for j in journals]
    now = (_columns([_at_speed(f, speed_scale(reference, s), h) for f, s, h in zip(rows, speeds, held)])
           if scaled else measured)
    out = Comparison(experiment, entry["runs"])
    for figure, base_values in sorted(base_figures.items()):
        values = now.get(figure)
        if not values:
            # A figure whose meaning changed since the baseline was saved may not exist any more for this
            # workload (lost_steps without ckpt_commit): that is the baseline's age, not a regression.
            (out.stale if figure.rsplit(".", 1)[-1] in old_meaning else out.missing).append(figure)
            continue
        as_measured = entry["figures"].get(figure)
        if scaled and is_timing(figure) and not scales(figure) and as_measured:
            # A wait (or a figure not classified) against the baseline as measured: a baseline saved before
            # issue 56 scaled these too in at_reference_speed.
            out.as_measured.append(figure)
            base_values = as_measured
        rescaled = scaled and scales(figure)
        out.changes.append(FigureChange(figure, statistics.median(values), statistics.median(base_values),
                                        bound_for(figure, base_values, rel), len(values), len(base_values),
                                        statistics.median(measured[figure]) if rescaled else None,
                                        bound_for(figure, as_measured, rel) if rescaled and as_measured else None))
    out.speed = _speed_note(scaled, reference, speeds, entry, out.as_measured, "wall_s" in now and any(held))
    return out


def _speed_note(scaled: bool, reference: Any, speeds: list[float | None], entry: dict[str, Any],
                as_measured: list[str] | None = None, held: bool = False) -> str:
    if scaled:
        ratio = statistics.median(speeds) / reference  # type: ignore[type-var,operator]
        way = "slower" if ratio >= 1 else "faster"
        note = (f"timing figures at the baseline's host speed (this host {max(ratio, 1 / ratio):.2f}x {way} "
                f"by chaos.runtime.host_speed's probe; scaled at most {MAX_SPEED_SCALE:g}x, and a figure within "
                f"its bound as measured never regresses)")
        unscaled = [*(as_measured or []), *(["wall_s's held time (timed faults' duration_s)"] if held else [])]
        if unscaled:
            note += (f"; compared as measured, not scaled (waits set by a timeout, a fault's duration or a "
                     f"scheduler, or not known to move with the host): {', '.join(unscaled)}")
        return note
    if "host_reference_s" not in entry:
        return ("timing figures as measured: the baseline has no host-speed probe (saved before chaos "
                "recorded one); re-save it to compare at equal speed")
    return "timing figures as measured: a run has no host-speed probe (journal.json without host_speed)"


def markdown_summary(comparisons: list[Comparison]) -> str:
    """A table that fits a pull-request comment: each figure, now vs baseline, and the verdict."""
    lines = ["| experiment | figure | now | baseline | change | verdict |", "|---|---|---|---|---|---|"]
    notes = [f"- {c.experiment}: {c.speed}" for c in comparisons if c.speed]
    # The verdict stays "ok" (what a pull request's reader and a script look for); why, where scaling alone
    # would have failed it, goes under the table.
    notes += [f"- {c.experiment}: {ch.figure} is over its bound only when scaled ({_fmt(ch.now)} > "
              f"{_fmt(ch.bound)}); ok as measured ({_fmt(ch.measured)} within "  # type: ignore[arg-type]
              f"{_fmt(ch.measured_bound)})"  # type: ignore[arg-type]
              for c in comparisons for ch in c.changes if ch.within_as_measured and ch.now > ch.bound]
    for c in comparisons:
        if c.absent:
            verdict = "not gated (--allow-new)" if c.allow_new else "**NOT IN BASELINE**"
            lines.append(f"| {c.experiment} | - | - | - | - | {verdict} |")
        for ch in c.changes:
            verdict = "**REGRESSED**" if ch.regressed else "ok"
            lines.append(f"| {c.experiment} | {ch.figure} | {_fmt(ch.now)} | {_fmt(ch.base)} | {ch.change} | {verdict} |")
        for figure in c.missing:
            lines.append(f"| {c.experiment} | {figure} | - | - | - | **MISSING** |")
        for figure in c.stale:
            lines.append(f"| {c.experiment} | {figure} | - | - | - | not compared (baseline predates the "
                         f"figure's meaning; re-save it) |")
    regressed = sum(len(c.regressions) + len(c.missing) for c in comparisons)
    unbased = [c.experiment for c in comparisons if c.absent and not c.allow_new]
    if regressed:
        head = f"**{regressed} figure(s) regressed or missing** against the baseline"
    else:
        head = "No figure regressed against the baseline"
    if unbased:
        head += (f"; **{len(unbased)} experiment(s) not in the baseline** ({', '.join(unbased)}): add them with "
                 f"`chaos baseline save` or pass `--allow-new`")
    return head + "\n\n" + "\n".join(lines) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"
