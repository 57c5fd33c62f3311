"""Run a coverage plan: the gate once to calibrate (if asked), on healthy runs, then once under each fault alone,
each a whole run of the one runner (fresh target, every fault reverted), judged cell by cell.

Every run's folder sits inside the coverage run's own (``{gate_dir}``), beside coverage.json and coverage.md.
A run is an experiment derived from the plan: its workload is the gate, its one fault is the cell's, it has no
checks (the cell is judged from the harness's records: chaos.gate.cell), and nothing of the runner's own
patience may decide for the gate: the join and stall limits are lifted, and the run's time limit is the
plan's deadline when there is one.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path
from typing import Any, Callable

from chaos.errors import UsageError
from chaos.evidence.outcome import RunReport
from chaos.gate.cell import Cell, judge
from chaos.gate.matrix import Coverage
from chaos.run.rundir import new_run_dir
from chaos.run.runner import Runner
from chaos.spec.experiment import Experiment, FaultSpec
from chaos.spec.gate import GateConfig

GATE_DIR = "{gate_dir}"


def label(spec: FaultSpec) -> str:
    return spec.config.name or f"{spec.kind}#{spec.index}"


def _sub(value: Any, folder: str) -> Any:
    if isinstance(value, str):
        return value.replace(GATE_DIR, folder)
    if isinstance(value, list):
        return [_sub(v, folder) for v in value]
    return value


def cell_experiment(exp: Experiment, folder: Path, spec: FaultSpec | None, *, extra_args: list[str] = (),
                    suffix: str = "") -> Experiment:
    """The run of one cell: the plan's gate as the workload, ``spec`` its only fault (None: a healthy run)."""
    gate = exp.gate
    assert gate is not None
    w = exp.workload
    where = str(folder.resolve())
    update: dict[str, Any] = {
        "args": {k: _sub(v, where) for k, v in w.args.items()},
        "env": {k: _sub(v, where) for k, v in w.env.items()},
        "command": None if w.command is None else [*_sub(w.command, where), *extra_args],
        "cwd": None if w.cwd is None else _sub(w.cwd, where),
        # The gate answers for itself: the runner's own patience (a rendezvous that does not complete, a
        # silence) must not end a run before the gate does.
        "join_timeout_s": 3600.0, "stall_s": None,
    }
    if w.command is None and extra_args:
        # A script's extra arguments: the script_args form takes --flag [value] pairs; pass them verbatim.
        update["args"] = {**update["args"], **_as_args(extra_args)}
    workload = w.model_copy(update=update)
    name = f"{exp.name}-{suffix or (re.sub(r'[^A-Za-z0-9._-]', '-', label(spec)) if spec else 'healthy')}"
    return dataclasses.replace(exp, name=name[:100], workload=workload, faults=[spec] if spec else [], checks=[],
                               gate=None, timeout_s=gate.deadline_s or exp.timeout_s)


def _as_args(extra: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(extra):
        flag = extra[i]
        if not flag.startswith("--"):
            raise UsageError(f"gate.calibrate: '{flag}' is not a --flag (a script workload takes --flag [value])")
        key = flag[2:].replace("-", "_")
        if i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            out[key] = extra[i + 1]
            i += 2
        else:
            out[key] = True
            i += 1
    return out


def describe_gate(exp: Experiment) -> str:
    w = exp.workload
    if w.command is not None:
        return shlex.join(w.command)
    from chaos.runtime.launch import script_args

    return shlex.join([w.launcher, str(w.script), *script_args(w.args)])


def run_coverage(exp: Experiment, runs_root: Path | str, *, echo: Callable[[str], None] | None = None,
                 on_cell: Callable[[str, Cell], None] | None = None,
                 run: Callable[[Experiment, Path], RunReport] | None = None) -> Coverage:
    """Every run of the plan, judged; coverage.json and coverage.md written in the coverage run's folder.
    ``run`` starts one experiment (the runner by default; tests pass their own)."""
    if exp.gate is None:
        raise UsageError(f"{exp.source} has no gate section: it is an experiment, run it with 'chaos run'")
    gate: GateConfig = exp.gate
    echo = echo or (lambda _m: None)
    start = run or _run
    folder = new_run_dir(Path(runs_root), f"{exp.name}-coverage")
    result = Coverage(name=exp.name, gate=gate, gate_command=describe_gate(exp), target=exp.target_kind,
                      listed=[label(s) for s in exp.faults], folder=str(folder))

    def one(spec: FaultSpec | None, *, healthy: bool, extra: list[str] = (), suffix: str = "") -> Cell:
        cell = judge(start(cell_experiment(exp, folder, spec, extra_args=list(extra), suffix=suffix), folder),
                     gate, healthy=healthy)
        if on_cell is not None:
            on_cell("calibration" if suffix == "calibrate" else (cell.fault or "healthy"), cell)
        result.write(folder)  # after every cell: an interrupted coverage run keeps what it found
        return cell

    try:
        if gate.calibrate:
            echo("calibrating the gate on the healthy target")
            result.calibration = one(None, healthy=True, extra=gate.calibrate, suffix="calibrate")
            if result.calibration.verdict != "ok":
                return result
        for i in range(gate.healthy_runs):
            result.healthy.append(one(None, healthy=True, suffix=f"healthy-{i}" if gate.healthy_runs > 1 else ""))
            if _interrupted(result.healthy[-1]):
                return result
        for spec in exp.faults:
            result.faults.append(one(spec, healthy=False))
            if _interrupted(result.faults[-1]):
                return result
        return result
    finally:
        result.write(folder)


def _interrupted(cell: Cell) -> bool:
    return cell.verdict == "error" and cell.reason.startswith("interrupted")


def _run(exp: Experiment, folder: Path) -> RunReport:
    # No golden run (nothing compares a digest) and no host-speed probe (no timing gate reads one).
    return Runner(exp, runs_root=folder, probe_host=False).run()
