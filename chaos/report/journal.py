"""The run's record for machines: journal.json (faults, recovery figures, verdicts) and junit.xml for CI."""

from __future__ import annotations

import json
import os
import statistics
import xml.etree.ElementTree as ET
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from chaos.gameday.summary import summarize
from chaos.report.terminal import headline

if TYPE_CHECKING:
    from chaos.evidence.outcome import RunReport


def journal_dict(report: "RunReport", wall0: float) -> dict[str, Any]:
    o = report.outcome
    h = o.history
    return {
        "experiment": o.experiment.name,
        "description": o.experiment.description,
        "source": str(o.experiment.source),
        "run_dir": str(report.run_dir),
        "started": wall0,
        "wall_s": round(o.wall_s, 3),
        "exit_code": report.exit_code,
        "verdict": headline(report)[0].split(" ", 1)[0],
        "workload_exit_code": o.exit_code,
        "timed_out": o.timed_out,
        "attempts": h.all_attempts(),
        "max_step": h.max_step(),
        "diagnostics": o.diagnostics,
        "commands": [r["cmdline"] for r in h.of("cmd")],
        "checkpoints": checkpoint_figures(h),
        "faults": [asdict(f) for f in o.faults],
        "checks": [asdict(c) for c in report.checks],
        "revert_failures": report.revert_failures,
        "host_speed": host_speed(h),
        **summarize(o.history, o.faults, o.experiment, o.goodput),
    }


def host_speed(history: Any) -> dict[str, Any]:
    """The host's speed around the run (chaos.runtime.host_speed.probe_s, before launch and after the workload
    was gone): ``probe_s`` is their mean, None when neither was measured."""
    samples = {str(r.get("when")): r.get("probe_s") for r in history.of("host_speed")
               if isinstance(r.get("probe_s"), (int, float))}
    return {"probe_s": round(statistics.fmean(samples.values()), 4) if samples else None, **samples}


def checkpoint_figures(history: Any) -> dict[str, Any]:
    """What the run's saves cost, from the workload's own ``ckpt_commit`` events (seconds, bytes)."""
    commits = history.of("ckpt_commit")
    seconds = [float(r["seconds"]) for r in commits if isinstance(r.get("seconds"), (int, float))]
    sizes = [int(r["bytes"]) for r in commits if isinstance(r.get("bytes"), int)]
    return {"saves": len(commits),
            "save_s_median": round(statistics.median(seconds), 4) if seconds else None,
            "bytes_median": int(statistics.median(sizes)) if sizes else None}


def write_journal(report: "RunReport", wall0: float) -> None:
    path = report.run_dir / "journal.json"
    # Whole or not at all: readers (chaos report, baselines, the gate) never see a half-written journal.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(journal_dict(report, wall0), indent=2, default=str))
    os.replace(tmp, path)


def write_junit(report: "RunReport") -> None:
    """One testsuite per experiment, one testcase per check; failures carry the one-line reason."""
    o = report.outcome
    checks = report.checks
    suite = ET.Element("testsuite", {
        "name": f"chaos.{o.experiment.name}",
        "tests": str(len(checks)),
        # An inconclusive check fails the gate like a failed one; its message says what evidence was missing.
        "failures": str(sum(c.verdict in ("fail", "inconclusive") for c in checks)),
        "errors": str(sum(c.verdict == "error" for c in checks)),
        "skipped": "0",
        "time": f"{o.wall_s:.3f}",
    })
    for c in checks:
        case = ET.SubElement(suite, "testcase", {"classname": f"chaos.{o.experiment.name}", "name": c.kind})
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
    ET.ElementTree(root).write(report.run_dir / "junit.xml", encoding="utf-8", xml_declaration=True)
