"""Benchmark: the baseline gate's noise (false alarms on unchanged reruns) beside what it must catch.

One run: a baseline of the experiment (``--base-repeat`` runs on a quiet box), then ``--reruns`` runs
of the same, unchanged code under each condition (``quiet``; ``loaded``: ``--burners`` busy processes
beside the run, a CI runner shared with another job), each gated alone against the baseline, the
noise a pull request would see. Then the two regressions the gate exists for, each gated as the
median of ``--slowed`` runs: a slower checkpoint save (``ckpt_write_delay_s``) and a slower restore
(``ckpt_read_delay_s``). Prints, per gated figure, the baseline, the bound, each condition's false
alarms (reruns over the bound) and worst value, and the two slowed runs; then where each kill
really landed (the trigger's jitter that lost_steps no longer counts, issue 39).

Each rerun is gated twice from the same journals, side by side: as measured (the gate before issue
39's host-speed scaling, the baseline of this benchmark) and at the baseline's host speed (what
``chaos run --baseline`` does now, chaos.report.baseline).

Goal (issues 13, 39): 0 false alarms in the quiet reruns; the slowed save fails on ckpt.save_s and
the slowed restore on a recovery figure.

    python ci/bench/gate_noise.py [--experiment experiments/rank-kill-ddp.yaml] [--reruns 10]
        [--conditions quiet,loaded] [--delay 1.0] [--read-delay 3.0]
        [--steps 40 --ckpt-every 5 --at-step 17]   # the scenario of issue 39
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import multiprocessing
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from chaos.report.baseline import Comparison, build_baseline, compare, speed_of  # noqa: E402
from chaos.report.journal import Journal  # noqa: E402
from chaos.spec.load import load_experiment  # noqa: E402
from chaos.run.golden import Golden  # noqa: E402
from chaos.run.runner import Runner  # noqa: E402


def run_journals(exp: Any, runs: Path, n: int) -> list[Journal]:
    return [Journal.read(Runner(exp, runs_root=runs, golden=Golden(exp, runs)).run().run_dir) for _ in range(n)]


def _burn() -> None:
    while True:
        pass


@contextlib.contextmanager
def load(burners: int) -> Iterator[None]:
    """``burners`` processes spinning on a core each for the duration: another job on the runner."""
    procs = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(burners)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join()


def with_args(exp: Any, **args: Any) -> Any:
    changed = copy.copy(exp)
    changed.workload = exp.workload.model_copy(update={"args": {**exp.workload.args, **args}})
    return changed


def as_measured(baseline: dict[str, Any]) -> dict[str, Any]:
    """The same baseline without its host-speed reference: the gate as it compared before issue 39."""
    raw = copy.deepcopy(baseline)
    for entry in raw["experiments"].values():
        for key in ("host_probe_s", "host_reference_s", "at_reference_speed"):
            entry.pop(key, None)
    return raw


def scenario(path: str, steps: int | None, ckpt_every: int | None, at_step: int | None, tmp: Path) -> Any:
    """The experiment, with the workload's steps, checkpoint interval and the first fault's at_step replaced."""
    if steps is None and ckpt_every is None and at_step is None:
        return load_experiment(path)
    doc = yaml.safe_load(Path(path).read_text())
    args = doc["workload"].setdefault("args", {})
    if steps is not None:
        args["steps"] = steps
    if ckpt_every is not None:
        args["ckpt_every"] = ckpt_every
    if at_step is not None:
        doc["faults"][0]["trigger"] = {"at_step": at_step}
    doc["name"] = f"{doc['name']}-s{args.get('steps')}-c{args.get('ckpt_every')}"
    out = tmp / "scenario.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    # Relative paths (workload script) are resolved from the experiment file's folder: keep it the original's.
    os.chdir(ROOT)
    return load_experiment(out)


def landings(journals: list[Journal]) -> str:
    """The range of each landing figure over these runs: ``landed_step 25-27, ...``."""
    out = []
    for name in ("trigger_step", "landed_step", "durable_step", "steps_since_ckpt", "lost_steps"):
        values = [f.recovery[name] for j in journals for f in j.faults
                  if isinstance(f.recovery.get(name), (int, float))]
        if values:
            out.append(f"{name} {min(values):g}-{max(values):g}")
    return ", ".join(out) or "no landing figures (journals without them)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default=str(ROOT / "experiments" / "rank-kill-ddp.yaml"))
    ap.add_argument("--base-repeat", type=int, default=3)
    ap.add_argument("--reruns", type=int, default=10)
    ap.add_argument("--conditions", default="quiet,loaded", help="comma-separated: quiet, loaded")
    ap.add_argument("--burners", type=int, default=1, help="busy processes beside a 'loaded' rerun (default 1)")
    ap.add_argument("--slowed", type=int, default=1, help="runs of each slowed variant, gated as a median")
    ap.add_argument("--delay", type=float, default=1.0, help="ckpt_write_delay_s of the slowed save")
    ap.add_argument("--read-delay", type=float, default=3.0, help="ckpt_read_delay_s of the slowed restore")
    ap.add_argument("--slowed-loaded", action="store_true", help="also run the slowed save and restore beside "
                    "the busy processes (the host-speed scaling must not hide them there)")
    ap.add_argument("--steps", type=int, help="override the workload's steps")
    ap.add_argument("--ckpt-every", type=int, help="override the workload's ckpt_every")
    ap.add_argument("--at-step", type=int, help="override the first fault's trigger with at_step N")
    args = ap.parse_args()
    conditions = [c for c in args.conditions.split(",") if c]
    unknown = set(conditions) - {"quiet", "loaded"}
    if unknown:
        ap.error(f"unknown condition(s) {', '.join(sorted(unknown))}: use quiet and/or loaded")
    reruns: dict[str, list[Comparison]] = {}
    raw_reruns: dict[str, list[Comparison]] = {}
    rerun_journals: list[Journal] = []
    with tempfile.TemporaryDirectory(prefix="chaos-gate-") as tmp:
        runs = Path(tmp)
        exp = scenario(args.experiment, args.steps, args.ckpt_every, args.at_step, runs)
        base_journals = run_journals(exp, runs, args.base_repeat)
        probes = {"baseline": [speed_of(j) or 0.0 for j in base_journals]}
        baseline = build_baseline(base_journals)
        raw = as_measured(baseline)
        for condition in conditions:
            with load(args.burners if condition == "loaded" else 0):
                journals = run_journals(exp, runs, args.reruns)
            rerun_journals += journals
            probes[condition] = [speed_of(j) or 0.0 for j in journals]
            reruns[condition] = [compare(exp.name, [j], baseline) for j in journals]
            raw_reruns[condition] = [compare(exp.name, [j], raw) for j in journals]
        slow_save = compare(exp.name, run_journals(with_args(exp, ckpt_write_delay_s=args.delay), runs,
                                                   args.slowed), baseline)
        slow_load = compare(exp.name, run_journals(with_args(exp, ckpt_read_delay_s=args.read_delay), runs,
                                                   args.slowed), baseline)
        loaded_slowed: list[tuple[str, Comparison | None]] = []
        if args.slowed_loaded:
            # The scaling must not hide what the gate exists for on a loaded runner either.
            with load(args.burners):
                for what, changed in (("save", with_args(exp, ckpt_write_delay_s=args.delay)),
                                      ("restore", with_args(exp, ckpt_read_delay_s=args.read_delay))):
                    loaded_slowed.append((what, compare(exp.name, run_journals(changed, runs, args.slowed), baseline)))
    assert slow_save is not None and slow_load is not None

    print(f"{exp.name}: baseline of {args.base_repeat} quiet run(s); {args.reruns} unchanged rerun(s) per condition, "
          f"each gated alone ('loaded': {args.burners} busy process(es) beside it); slowed runs gated as a median "
          f"of {args.slowed}")
    print(f"host-speed probe (s, higher is slower): baseline {', '.join(f'{p:g}' for p in probes['baseline'])}; "
          + "; ".join(f"{c} {min(probes[c]):g}-{max(probes[c]):g}" for c in conditions))
    base_probe = statistics.median(probes["baseline"])
    for condition in conditions:
        moved = [ch.measured / ch.base for c in reruns[condition] for ch in c.changes
                 if ch.measured is not None and ch.base > 0.5]
        if moved:
            print(f"  {condition}: the probe {statistics.median(probes[condition]) / base_probe:.2f}x the baseline's, "
                  f"timing figures over 0.5 s as measured {statistics.median(moved):.2f}x (median over figures and reruns)")
    print("alarms: unchanged reruns over the bound, as measured | at the baseline's host speed")
    head = f"{'figure':<28}{'baseline':>10}{'bound':>10}"
    for condition in conditions:
        head += f"{condition + ' alarms':>20}{'worst':>10}"
    head += f"{'slow save':>11}{'slow load':>11}"
    print(head)
    figures = [ch.figure for ch in next(iter(reruns.values()))[0].changes] if reruns else \
        [ch.figure for ch in slow_save.changes]
    for figure in figures:
        first = next(ch for c in [*sum(reruns.values(), []), slow_save] for ch in c.changes if ch.figure == figure)
        row = f"{figure:<28}{first.base:>10.3g}{first.bound:>10.3g}"
        for condition in conditions:
            changes = [ch for c in reruns[condition] for ch in c.changes if ch.figure == figure]
            raw_alarms = sum(ch.regressed for c in raw_reruns[condition] for ch in c.changes if ch.figure == figure)
            alarms = sum(ch.regressed for ch in changes)
            worst = max((ch.now for ch in changes), default=float("nan"))
            n = len(reruns[condition])
            row += f"{f'{raw_alarms}/{n} | {alarms}/{n}':>20}{worst:>10.3g}"
        for slowed in (slow_save, slow_load):
            ch = next((ch for ch in slowed.changes if ch.figure == figure), None)
            row += f"{'-' if ch is None else f'{ch.now:.3g}' + ('!' if ch.regressed else ''):>11}"
        print(row)
    print("('!': over the bound, a regression the gate reports)")
    for condition in conditions:
        failed = [c for c in reruns[condition] if c.failed]
        raw_failed = sum(c.failed for c in raw_reruns[condition])
        print(f"\n{condition}: unchanged reruns that failed the gate: {len(failed)} of {len(reruns[condition])} "
              f"({len(failed) / max(1, len(reruns[condition])):.0%}; as measured: {raw_failed})"
              + "".join(f"\n  {'; '.join(ch.describe() for ch in c.regressions) or c.missing}" for c in failed))
    print(f"\nwhere the faults landed (baseline and reruns): {landings(base_journals + rerun_journals)}")
    save_caught = [ch.figure for ch in slow_save.regressions]
    load_caught = [ch.figure for ch in slow_load.regressions]
    print(f"slowed save (ckpt_write_delay_s {args.delay:g}): "
          f"{'FAILED the gate on ' + ', '.join(save_caught) if save_caught else 'NOT caught'}")
    print(f"slowed restore (ckpt_read_delay_s {args.read_delay:g}): "
          f"{'FAILED the gate on ' + ', '.join(load_caught) if load_caught else 'NOT caught'}")
    for what, comparison in loaded_slowed:
        caught = [ch.figure for ch in comparison.regressions] if comparison else []
        print(f"slowed {what} on the loaded box: {'FAILED the gate on ' + ', '.join(caught) if caught else 'NOT caught'}")
    quiet_ok = not [c for c in reruns.get("quiet", []) if c.failed]
    save_ok = any(f.endswith("ckpt.save_s") for f in save_caught)
    load_ok = any(f.rsplit(".", 1)[-1] in ("restart_s", "resume_s", "regain_s") for f in load_caught)
    return 0 if quiet_ok and save_ok and load_ok else 1


if __name__ == "__main__":
    sys.exit(main())
