"""The run's record: one typed ``Journal`` built once from the finished run, written as journal.json and read
back as the same type. Every renderer reads it (report.md, report.html, the timeline, the index of many
runs, the baseline and the gate, junit.xml), so a field is named in one place and a renderer cannot
misspell it; ``chaos report`` renders any finished run again from its folder alone."""

from __future__ import annotations

import json
import os
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from chaos.errors import UsageError
from chaos.evidence.outcome import CheckResult, FaultRecord, look, run_verdict

if TYPE_CHECKING:
    from chaos.evidence.outcome import RunReport

FILE = "journal.json"


class CheckpointFigures(BaseModel):
    """What the run's saves cost, from the workload's own ``ckpt_commit`` events."""

    saves: int = 0
    save_s_median: float | None = None
    bytes_median: int | None = None


class Journal(BaseModel):
    """journal.json: what happened in one run and how it was judged."""

    # A journal written by an older or newer chaos still reads: unknown keys are dropped, missing ones default.
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    experiment: str
    """The experiment's name (``<name>-golden`` for a fault-free reference run)."""
    description: str = ""
    source: str = ""
    """The experiment file the run was loaded from."""
    run_dir: str = ""
    """Where the run was written (``folder`` is where this journal was read from)."""
    started: float = 0.0
    """Wall-clock time of the start (Unix seconds)."""
    wall_s: float = 0.0
    exit_code: int | None = None
    """The run's exit code (chaos.evidence.outcome.exit_code_for)."""
    verdict: str | None = None
    """The headline's word (PASS, FAIL, INCONCLUSIVE, INVALID, ERROR); None in journals written before it was."""
    workload_exit_code: int | None = None
    timed_out: bool = False
    attempts: list[str] = Field(default_factory=list)
    max_step: int | None = None
    diagnostics: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    """Every command the harness ran on the hosts (faults, reverts), in order."""
    checkpoints: CheckpointFigures = Field(default_factory=CheckpointFigures)
    faults: list[FaultRecord] = Field(default_factory=list)
    checks: list[CheckResult] = Field(default_factory=list)
    revert_failures: list[str] = Field(default_factory=list)
    host_speed: dict[str, float | None] = Field(default_factory=dict)
    """chaos.runtime.host_speed's probe before and after the run; ``probe_s`` is their mean."""
    goodput: dict[str, Any] | None = None
    """The goodput split (chaos.evidence.goodput) with its segments; None in journals written before it was."""
    gameday: dict[str, Any] | None = None
    """A game day's plan and drawn schedule."""
    projection: dict[str, Any] | None = None
    """A game day's projection to scale."""

    _folder: Path | None = PrivateAttr(default=None)

    @property
    def folder(self) -> Path:
        """The run's folder: where this journal was read from, else where the run was written."""
        return self._folder if self._folder is not None else Path(self.run_dir)

    @property
    def word(self) -> str:
        """The run's verdict as shown (PASS, FAIL, ...), from the exit code where an old journal has none."""
        return self.verdict or look(run_verdict(self.exit_code, [c.verdict for c in self.checks])).label

    @property
    def is_reference(self) -> bool:
        """A fault-free reference run: it judges nothing itself, so it is never listed as a PASS."""
        return self.experiment.endswith("-golden") and not self.checks

    @classmethod
    def of_run(cls, report: "RunReport", wall0: float) -> "Journal":
        from chaos.gameday.summary import summarize
        from chaos.report.terminal import headline

        o = report.outcome
        h = o.history
        journal = cls(
            experiment=o.experiment.name, description=o.experiment.description, source=str(o.experiment.source),
            run_dir=str(report.run_dir), started=wall0, wall_s=round(o.wall_s, 3), exit_code=report.exit_code,
            verdict=headline(report)[0].split(" ", 1)[0], workload_exit_code=o.exit_code, timed_out=o.timed_out,
            attempts=h.all_attempts(), max_step=h.max_step(), diagnostics=o.diagnostics,
            commands=[r["cmdline"] for r in h.of("cmd")], checkpoints=checkpoint_figures(h),
            faults=o.faults, checks=report.checks, revert_failures=report.revert_failures,
            host_speed=host_speed(h), **summarize(o.history, o.faults, o.experiment, o.goodput))
        journal._folder = report.run_dir
        return journal

    def as_json(self) -> str:
        # A fault's details may hold a value JSON has no type for (a path, an exception): its text, never a crash.
        return self.model_dump_json(indent=2, fallback=str)

    def write(self, folder: Path) -> Path:
        """journal.json in ``folder``, whole or not at all: readers (chaos report, baselines, the gate) never
        see a half-written journal."""
        path = folder / FILE
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(self.as_json())
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, folder: str | Path) -> "Journal":
        """The journal of a finished run's folder; a UsageError that says what to do when there is none."""
        folder = Path(folder)
        path = folder / FILE
        try:
            journal = cls.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise UsageError(f"{folder} has no readable {FILE} ({exc.strerror or exc}); pass a finished "
                             f"runs/<name>-<time> folder") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "the top level"
            raise UsageError(f"{path}: not a journal chaos can read ({where}: {first['msg']}); remove it or re-run "
                             f"that experiment") from None
        journal._folder = folder
        return journal


def host_speed(history: Any) -> dict[str, float | None]:
    """The host's speed around the run (chaos.runtime.host_speed.probe_s, before launch and after the workload
    was gone): ``probe_s`` is their mean, None when neither was measured."""
    samples = {str(r.get("when")): float(r["probe_s"]) for r in history.of("host_speed")
               if isinstance(r.get("probe_s"), (int, float))}
    return {"probe_s": round(statistics.fmean(samples.values()), 4) if samples else None, **samples}


def checkpoint_figures(history: Any) -> CheckpointFigures:
    """What the run's saves cost, from the workload's own ``ckpt_commit`` events (seconds, bytes)."""
    commits = history.of("ckpt_commit")
    seconds = [float(r["seconds"]) for r in commits if isinstance(r.get("seconds"), (int, float))]
    sizes = [int(r["bytes"]) for r in commits if isinstance(r.get("bytes"), int)]
    return CheckpointFigures(saves=len(commits),
                             save_s_median=round(statistics.median(seconds), 4) if seconds else None,
                             bytes_median=int(statistics.median(sizes)) if sizes else None)


def read_journals(paths: list[str | Path]) -> list[Journal]:
    """The journal of each run directory given, or of every run directory under a folder of runs."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if (p / FILE).is_file():
            found.append(p)
        elif p.is_dir():
            found += sorted(j.parent for j in p.glob(f"*/{FILE}"))
        else:
            raise UsageError(f"{p}: not a run directory (no {FILE}) nor a folder of runs")
    if not found:
        raise UsageError(f"no {FILE} under {', '.join(map(str, paths))}: run experiments first (chaos run)")
    return [Journal.read(folder) for folder in found]


def write_junit(journal: Journal, folder: Path) -> Path:
    """junit.xml: one testsuite per experiment, one testcase per check; failures carry the one-line reason."""
    checks = journal.checks
    suite = ET.Element("testsuite", {
        "name": f"chaos.{journal.experiment}",
        "tests": str(len(checks)),
        # An inconclusive check fails the gate like a failed one; its message says what evidence was missing.
        "failures": str(sum(c.verdict in ("fail", "inconclusive") for c in checks)),
        "errors": str(sum(c.verdict == "error" for c in checks)),
        "skipped": "0",
        "time": f"{journal.wall_s:.3f}",
    })
    for c in checks:
        case = ET.SubElement(suite, "testcase", {"classname": f"chaos.{journal.experiment}", "name": c.kind})
        if c.verdict in ("fail", "inconclusive"):
            message = c.reason if c.verdict == "fail" else f"INCONCLUSIVE: {c.reason}"
            ET.SubElement(case, "failure", {"message": message, "type": c.verdict}).text = json.dumps(
                c.figures, default=str)
        elif c.verdict == "error":
            ET.SubElement(case, "error", {"message": c.reason})
        else:
            ET.SubElement(case, "system-out").text = c.reason
    root = ET.Element("testsuites")
    root.append(suite)
    path = folder / "junit.xml"
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


__all__ = ["CheckpointFigures", "Journal", "checkpoint_figures", "host_speed", "read_journals",
           "write_junit"]
