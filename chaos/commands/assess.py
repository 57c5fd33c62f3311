"""``chaos assess JOB``: watch one fault-free run of a training job, plan a battery of faults placed where each
bites, run them one at a time, and write a resilience report card (terminal, report.md, report.html, card.json) and
the experiments as YAML files to keep as a CI gate. Exit 0 every experiment passed, 1 one did not (or could not be
proven), 2 invalid input, 3 harness error."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import yaml
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from chaos.assess.card import card_dict, project, row_of
from chaos.assess.job import Job
from chaos.assess.observe import Observation, observe
from chaos.assess.plan import Options, Probe, plan, total_estimate
from chaos.assess.render import observation_lines, print_card, write
from chaos.errors import ExperimentError, HarnessError, UsageError
from chaos.report.console import make_console
from chaos.report.journal import Journal
from chaos.run.session import run_experiment
from chaos.spec.load import load_experiment


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("assess", help="a resilience report card for a training job: observe it, plan faults, run "
                                      "them, write the card and the experiments",
                       description="chaos assess train.py [--arg steps=60]  |  chaos assess -- torchrun "
                                   "--nproc-per-node 2 train.py ...")
    p.add_argument("job", nargs="*", metavar="JOB", help="a training script, or your launch command after '--'")
    p.add_argument("--nproc", type=int, default=2, help="ranks for a script the harness launches (default 2)")
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                   help="an argument of the script, passed as --key value (repeat for more)")
    p.add_argument("--max-restarts", type=int, default=3, help="torchrun --max-restarts for a script (default 3)")
    p.add_argument("--python", help="the job's own interpreter (its virtual environment's bin/python)")
    p.add_argument("--step-regex", help="a regex with a group 'step' that finds the step in the job's output "
                                        "(default: proposed from the fault-free run's output)")
    p.add_argument("--only", default="", metavar="NAMES",
                   help="run only these probes, comma-separated: rank-kill, kill-during-save, hang, nan, "
                        "storage-full, corrupt-newest")
    p.add_argument("--hang-s", type=float, default=30.0, help="how long the hung rank stays frozen (default 30)")
    p.add_argument("--project-gpus", type=int, metavar="N", help="project the expected goodput at N GPUs")
    p.add_argument("--timeout-s", type=int, default=900, help="bound on the fault-free run (default 900)")
    p.add_argument("--out", help="where the card and the experiments are written (default ./assess-<job>)")
    p.add_argument("--plan-only", action="store_true",
                   help="observe and plan, write the experiments, run none of them")
    p.set_defaults(func=assess)


def assess(args: argparse.Namespace) -> int:
    console = make_console()
    job = Job.of(args.job, nproc=args.nproc, args=args.arg, max_restarts=args.max_restarts, python=args.python)
    only = tuple(x.strip() for x in args.only.split(",") if x.strip())
    options = Options(hang_s=args.hang_s, only=only)
    if args.step_regex:
        try:
            if "step" not in re.compile(args.step_regex).groupindex:
                raise UsageError(f"--step-regex {args.step_regex!r} has no group named 'step': write (?P<step>\\d+)")
        except re.error as exc:
            raise UsageError(f"--step-regex {args.step_regex!r} is not a regex: {exc}") from None
    out = Path(args.out or f"assess-{job.name}").resolve()
    _writable(out)
    runs = out / "runs"
    console.print(f"observing one fault-free run of: {escape(job.describe())}")
    seen = observe(job, job.name, out, runs, timeout_s=args.timeout_s)
    if args.step_regex:
        seen.step_regex, seen.step_regex_note = args.step_regex, f"step_regex {args.step_regex!r} given (--step-regex)"
    card_head = {"job": job.describe(), "observation": seen.as_dict()}
    for line in observation_lines(card_head):
        console.print(f"  {escape(line)}")
    probes = plan(seen, options)
    paths = _write_experiments(job, seen, probes, out)
    console.print(f"plan: {sum(p.runs for p in probes)} experiments, about {total_estimate(probes) / 60:.1f} min, "
                  f"one at a time")
    for p in probes:
        console.print(f"  {p.name:<17} " + escape(p.placed if p.runs else p.skip or ""))
    if args.plan_only:
        console.print(f"experiments written to {out / 'experiments'} (run them with: pytest {out / 'experiments'})")
        return 0
    journals: dict[str, Journal] = {}
    stopped: int | None = None
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task("battery", total=max(1.0, total_estimate(probes)))
        for p in probes:
            if not p.runs:
                continue
            if stopped is not None:  # Ctrl-C ended the battery: the card says what ran and what did not
                p.skip = "not run: the assessment was interrupted"
                continue
            bar.update(task, description=f"{p.name}")
            report = run_experiment(load_experiment(paths[p.name]), runs)
            journals[p.name] = Journal.read(report.run_dir)
            bar.advance(task, p.estimate_s)
            if report.exit_code > 128:  # the runner stopped the job and reverted its faults on SIGINT/SIGTERM
                stopped = report.exit_code
    rows = [row_of(p, journals.get(p.name), seen, str(paths[p.name].relative_to(out)) if p.name in paths else "")
            for p in probes]
    scale, note = (project(rows, journals, seen, args.project_gpus) if args.project_gpus
                   else (None, "not asked for (--project-gpus N)"))
    card = card_dict(seen, probes, rows, scale, note, job.describe())
    print_card(card, console)
    for path in write(card, out):
        console.print(f"wrote {path}")
    if stopped is not None:
        return stopped
    ran = [r for r in rows if r.survived != "not run"]
    return 0 if ran and all(r.survived == "yes" and r.verdict == "PASS" for r in ran) else 1


def _writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".chaos-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the card there ({exc.strerror}); give --out a writable folder") from None


def _write_experiments(job: Job, seen: Observation, probes: list[Probe], out: Path) -> dict[str, Path]:
    folder = out / "experiments"
    folder.mkdir(parents=True, exist_ok=True)
    workload = job.workload(experiments_dir=folder, step_regex=seen.step_regex, ckpt_dir=seen.ckpt_dir)
    paths = {}
    for p in probes:
        if not p.runs:
            continue
        doc = {"name": f"{job.name}-{p.name}",
               "description": f"chaos assess: {p.title}. Placed at {p.placed}.",
               "workload": workload, "target": "local", "faults": p.faults, "checks": p.checks,
               "timeout_s": p.timeout_s, "seed": 0}
        path = folder / f"{job.name}-{p.name}.yaml"
        text = yaml.safe_dump(doc, sort_keys=False)
        try:
            load_experiment(path, text)
        except ExperimentError as exc:  # what the planner wrote must be valid: a bug of chaos assess, not the user's
            raise HarnessError(f"chaos assess planned an invalid experiment {path.name}: "
                               + "; ".join(str(x) for x in exc.problems)) from None
        path.write_text(text)
        paths[p.name] = path
    return paths
