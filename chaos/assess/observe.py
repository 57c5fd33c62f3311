"""One fault-free run of the user's job, watched: what the battery is planned from.

The run is the golden run every experiment of the assessment would otherwise start once more (no faults, no
checks, the workload as it is): where it ends as a golden run must (it finished in one attempt and wrote its
final digests), it is filed as one (``Golden.adopt``). What is read from it:

- whether the job speaks the event protocol (its ranks write ``start`` and ``step``), or only prints; then a
  ``step_regex`` proposed from its output (``propose_step_regex``), said as proposed;
- its world size, its step time, its start-up;
- its saves: the steps it committed and how long each held training, from its ``ckpt_begin``/``ckpt_commit``,
  or, seen from outside, the checkpoint files it left in its working or checkpoint directory;
- whether its steps name the samples they trained (exactly-once can only be judged then).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from chaos.assess.job import WORK_DIR, Job
from chaos.errors import HarnessError, UsageError
from chaos.evidence.events import History
from chaos.report.journal import Journal

CKPT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".distcp", ".tar", ".pkl", ".npz")
"""A file the job left that a resume could read: what a checkpoint looks like from outside."""
CKPT_WORDS = ("ckpt", "checkpoint", "snapshot", "latest", "last")

STEP_WORDS = r"step|global_step|iter|iteration|it|epoch|batch"
_CANDIDATE = re.compile(rf"(?i)(?<![A-Za-z_])({STEP_WORDS})\b\s*[:=#]?\s*(\d+)")
_RANK = re.compile(r"(?i)\[?rank\s*[:=]?\s*(\d+)\]?")


@dataclass
class Observation:
    """What the fault-free run showed."""

    run_dir: str
    exit_code: int | None
    timed_out: bool
    wall_s: float
    speaks_protocol: bool
    world_size: int | None
    final_step: int
    step_s: float | None
    """Median seconds per step (the protocol's step events; estimated from the wall time for a job that only
    prints, and said so in ``step_s_how``)."""
    step_s_how: str
    startup_s: float | None
    saves: list[int] = field(default_factory=list)
    """Steps of the saves the job committed (ckpt_commit)."""
    save_s: float | None = None
    """Median ckpt_begin to the last rank's ckpt_commit."""
    save_bytes: int | None = None
    """Median bytes of one save, every rank's commit together (what a slowed disk must write)."""
    ckpt_paths: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Checkpoint-like files the job left in its working or checkpoint directory (relative to the run)."""
    ckpt_dir: str | None = None
    """The workload's ckpt_dir for the battery: None (the harness's, CHAOS_CKPT_DIR) or its working directory."""
    samples_traced: bool = False
    digests: bool = False
    step_regex: str | None = None
    step_regex_note: str = ""
    stack: list[str] = field(default_factory=list)
    golden: bool = False
    problem: str | None = None
    """Why the fault-free run cannot be a reference (it failed, restarted or timed out): the battery is not run."""

    @property
    def save_every(self) -> int | None:
        gaps = [b - a for a, b in zip(self.saves, self.saves[1:]) if b > a]
        return int(statistics.median(gaps)) if gaps else (self.saves[0] if len(self.saves) == 1 else None)

    @property
    def checkpoints_seen(self) -> bool:
        return bool(self.saves or self.files)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "save_every": self.save_every}


def observation_experiment(job: Job, name: str, experiments_dir: Path, timeout_s: int) -> str:
    """The fault-free run as an experiment file's text: what ``observe`` runs."""
    doc = {"name": f"{name}-observe",
           "description": "chaos assess: one fault-free run of the job, watched (its golden reference)",
           "workload": job.workload(experiments_dir=experiments_dir), "target": "local", "timeout_s": timeout_s}
    return yaml.safe_dump(doc, sort_keys=False)


def observe(job: Job, name: str, out: Path, runs_root: Path, *, timeout_s: int,
            echo: Callable[[str], None] | None = None) -> Observation:
    """Run the job once without faults and read what it showed."""
    from chaos.run.golden import Golden
    from chaos.run.runner import Runner
    from chaos.spec.load import load_experiment

    out.mkdir(parents=True, exist_ok=True)
    path = out / "observe.yaml"  # beside the experiments' folder, not in it: it is no experiment to keep
    path.write_text(observation_experiment(job, name, out, timeout_s))
    exp = load_experiment(path)
    golden = Golden(exp, runs_root)
    again = _cached_run(golden)
    if again is not None:  # this very job ran fault-free before, under the full golden key: read that run
        run_dir, journal = again
        seen = derive(History.from_run_dir(run_dir), run_dir, job, exit_code=journal.workload_exit_code,
                      timed_out=journal.timed_out, wall_s=journal.wall_s)
        seen.golden = True
        seen.step_regex_note = (seen.step_regex_note + f" Observed from the cached golden run in {run_dir}.").strip()
        return seen
    report = Runner(exp, runs_root=runs_root, probe_host=False, scan_values=True, echo=echo).run()
    o = report.outcome
    seen = derive(o.history, report.run_dir, job, exit_code=o.exit_code, timed_out=o.timed_out, wall_s=o.wall_s)
    if seen.problem is None and seen.speaks_protocol and seen.digests:
        try:
            golden.adopt(report)
            seen.golden = True
        except HarnessError as exc:  # e.g. the run restarted once by itself: the battery's golden runs anew
            seen.step_regex_note = (seen.step_regex_note + f" Not filed as the golden run: {exc}").strip()
    return seen


def _cached_run(golden: Any) -> tuple[Path, Any] | None:
    """The cached golden run's folder and journal, where both are still there."""
    summary = golden.cached()
    run_dir = Path(summary["run_dir"]) if summary and summary.get("run_dir") else None
    if run_dir is None or not (run_dir / "journal.json").is_file():
        return None
    try:
        return run_dir, Journal.read(run_dir)
    except UsageError:  # an unreadable journal: observe the job anew
        return None


def derive(history: History, run_dir: Path, job: Job, *, exit_code: int | None, timed_out: bool,
           wall_s: float) -> Observation:
    """What a finished fault-free run showed (a pure reading of its history and folder)."""
    steps = [r for r in history.of("step") if r.source != "output"]
    speaks = bool(steps or history.of("start"))
    starts = history.of("start")
    world = max((int(r.get("world_size") or 0) for r in starts + steps), default=0) or None
    if world is None:  # seen from outside: the workers the harness saw its launcher spawn in the one round
        world = len({(r.get("node"), r.get("worker_pid")) for r in history.of("worker_spawn")}) or None
    attempts = history.all_attempts()
    problem = None
    if timed_out:
        problem = f"the job did not finish within the observation's timeout ({wall_s:.0f} s): raise --timeout-s"
    elif exit_code != 0:
        problem = f"the job exited {exit_code} without any fault: see {run_dir}/output.log"
    elif len(attempts) > 1:
        problem = f"the job restarted without any fault ({len(attempts)} attempts): see {run_dir}/output.log"
    step_regex, note, printed = None, "", []
    if speaks:
        final = history.max_step()
        step_s, how = _step_time(steps)
    else:
        lines = (run_dir / "output.log").read_text(errors="replace").splitlines() \
            if (run_dir / "output.log").is_file() else []
        step_regex, printed, note = propose_step_regex(lines)
        final = max(printed, default=0)
        step_s, how = None, "unknown: no step was seen"
        if printed and wall_s > 0:
            # The steps the counter spans (0..29 is 30 of them; 50, 100, .. 500 is 500).
            rises = [b - a for a, b in zip(printed, printed[1:]) if b > a]
            span = max(printed) - min(printed) + (Counter(rises).most_common(1)[0][0] if rises else 1)
            step_s = round(wall_s / max(1, span), 4)
            how = f"estimated: the run's {wall_s:.1f} s over the {span} steps its output counted"
    launch = [r.t for r in history.of("launch")]
    first = min((r.t for r in steps), default=None)
    startup = round(first - launch[0], 3) if launch and first is not None else None
    saves, save_s, paths, save_bytes = _saves(history)
    files = _checkpoint_files(run_dir)
    ckpt_dir = None
    if not saves and any(f.startswith("work/") for f in files) and not any(f.startswith("ckpt/") for f in files):
        ckpt_dir = WORK_DIR  # it saves where it runs: the checks and storage faults look there
    return Observation(
        run_dir=str(run_dir), exit_code=exit_code, timed_out=timed_out, wall_s=round(wall_s, 3),
        speaks_protocol=speaks, world_size=world, final_step=final, step_s=step_s, step_s_how=how,
        startup_s=startup, saves=saves, save_s=save_s, save_bytes=save_bytes, ckpt_paths=paths, files=files, ckpt_dir=ckpt_dir,
        samples_traced=any(r.get("samples") for r in steps), digests=bool(history.finals()),
        step_regex=step_regex, step_regex_note=note, stack=job.stack(), problem=problem)


def _step_time(steps: list[Any]) -> tuple[float | None, str]:
    by_rank: dict[Any, list[tuple[int, float]]] = {}
    for r in steps:
        by_rank.setdefault(r.get("rank"), []).append((r.get("step"), r.t))
    gaps = []
    for seq in by_rank.values():
        seq.sort()
        gaps += [t1 - t0 for (s0, t0), (s1, t1) in zip(seq, seq[1:]) if s1 == s0 + 1 and t1 >= t0]
    if not gaps:
        return None, "unknown: fewer than two consecutive steps"
    return round(statistics.median(gaps), 4), f"median of {len(gaps)} gaps between a rank's consecutive steps"


def _saves(history: History) -> tuple[list[int], float | None, list[str], int | None]:
    commits = history.of("ckpt_commit")
    sizes: dict[Any, int] = {}
    for r in commits:
        if isinstance(r.get("bytes"), int):
            sizes[r.get("step")] = sizes.get(r.get("step"), 0) + r.get("bytes")
    begins: dict[Any, float] = {}
    for r in history.of("ckpt_begin"):
        begins[r.get("step")] = min(begins.get(r.get("step"), r.t), r.t)
    ends: dict[Any, float] = {}
    for r in commits:
        ends[r.get("step")] = max(ends.get(r.get("step"), r.t), r.t)
    held = [ends[s] - begins[s] for s in ends if s in begins]
    paths = sorted({str(r.get("path")) for r in commits if r.get("path")})
    steps = sorted(s for s in ends if isinstance(s, int) and s > 0)
    return (steps, (round(statistics.median(held), 4) if held else None), paths[:8],
            int(statistics.median(sizes.values())) if sizes else None)


def _checkpoint_files(run_dir: Path, limit: int = 40) -> list[str]:
    out = []
    for sub in ("work", "ckpt"):
        base = run_dir / sub
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if not p.is_file():
                continue
            rel = p.relative_to(run_dir).as_posix()
            lowered = rel.lower()
            if p.suffix.lower() in CKPT_SUFFIXES or any(w in lowered for w in CKPT_WORDS):
                out.append(rel)
            if len(out) >= limit:
                return out
    return out


STEP_WORDS_FIRST = ("step", "global_step", "iter", "iteration", "it")
"""Counter words that name optimizer steps; an epoch or batch counter is proposed only where none of these counts."""


def propose_step_regex(lines: list[str]) -> tuple[str | None, list[int], str]:
    """A ``step_regex`` for a job that only prints: the counter word (step, iter, epoch, ...) whose numbers, on the
    lowest rank's lines where the lines name ranks, rise by one constant stride (a job that logs every 10 steps counts
    10, 20, 30), never fall, and rise most often; a step word before an epoch or batch counter. Returns the regex, the
    numbers it reads from ``lines``, and what was found, in words; (None, [], why) where nothing counts."""
    found: dict[tuple[str, str | None], list[int]] = {}
    for line in lines:
        rank = _RANK.search(line)
        for m in _CANDIDATE.finditer(line):
            key = (m.group(1), rank.group(0) if rank else None)
            found.setdefault(key, []).append(int(m.group(2)))
    best: tuple[tuple[bool, int], str, str | None, int] | None = None
    for (word, marker), values in found.items():
        ranks = Counter(marker for (w, marker) in found if w == word)
        if marker is not None and len(ranks) > 1 and marker != _lowest(list(ranks)):
            continue  # the lowest rank's lines speak for the job
        steps = [b - a for a, b in zip(values, values[1:]) if b != a]
        if len(steps) < 2 or min(steps) < 0:
            continue  # too few rises, or it falls (a counter within an epoch, a second loop's)
        stride, rises = Counter(steps).most_common(1)[0]
        if rises < 0.8 * len(steps):
            continue
        score = (word.lower() in STEP_WORDS_FIRST, rises)
        if best is None or score > best[0]:
            best = (score, word, marker, stride)
    if best is None:
        return None, [], ("no counter found in the output (a word such as step, iter or epoch followed by a number "
                          "that rises by a constant stride): give --step-regex, or emit chaos.sdk.step events")
    (is_step, _), word, marker, stride = best
    regex = (re.escape(marker) + r".*?" if marker else r"(?<![A-Za-z_])") + re.escape(word) + \
        r"\b\s*[:=#]?\s*(?P<step>\d+)"
    compiled = re.compile(regex)
    values = [int(m.group("step")) for m in map(compiled.search, lines) if m]
    shown = f" on {marker}'s lines" if marker else ""
    every = f", every {stride}" if stride != 1 else ""
    caveat = ("; check it counts training steps" if is_step else
              f"; '{word}' counts {word.lower()}s, not optimizer steps (no step counter rose steadily): every trigger and "
              f"bound of the battery is in {word.lower()}s; give --step-regex if the job prints its steps otherwise")
    return regex, values, (f"proposed step_regex {regex!r}: it reads '{word}' {min(values)}..{max(values)}{every} "
                           f"from {len(values)} lines of the output{shown}{caveat}")


def _lowest(markers: list[str | None]) -> str | None:
    def number(m: str | None) -> int:
        digits = re.search(r"\d+", m or "")
        return int(digits.group()) if digits else 1 << 30
    return min(markers, key=number)
