"""One run of a health gate, judged: did the gate fail while the fault was there (caught), and how fast.

Judged from what the harness itself saw, never from what the gate prints: the fault's injection record
(a fault that did not act leaves the cell untested, never caught), the ``launch`` and ``workload_exit``
records (when the gate started and ended, with its exit status), the run's time-out, and its reverts. A gate
that failed *before* the fault acted failed on its own, which is no catch; a gate that never answered is
hung, a miss, unless the plan names the deadline the launch pipeline would have stopped it at.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from chaos.run.rundir import tail_text

if TYPE_CHECKING:
    from chaos.evidence.outcome import RunReport
    from chaos.spec.gate import GateConfig

Verdict = Literal["caught", "caught_at_deadline", "missed", "hung", "untested", "ok", "false_alarm", "error"]
CAUGHT: frozenset[str] = frozenset({"caught", "caught_at_deadline"})
VERDICT_TEXT = {"caught": "caught", "caught_at_deadline": "caught at the deadline", "missed": "MISSED",
                "hung": "HUNG (missed)", "untested": "UNTESTED", "ok": "ok", "false_alarm": "FALSE ALARM",
                "error": "ERROR"}


@dataclass
class Cell:
    """One run of the gate: under one fault (``fault`` is its label) or healthy (``fault`` None)."""

    fault: str | None
    kind: str | None
    verdict: Verdict
    reason: str
    seconds: float | None = None
    """From the moment the fault was there (the gate's start, or the injection if later) to the gate's end."""
    gate_exit: int | None = None
    said: str = ""
    """The gate's last line of output: its own account of what it found."""
    run_dir: str = ""

    @property
    def caught(self) -> bool:
        return self.verdict in CAUGHT

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Cell":
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]


def _said(output_tail: str) -> str:
    """The gate's own account: its last line with FAIL in capitals (what the reference gate prints), else a
    launcher's account of the failure (torchrun's exitcode line), else its last line."""
    lines = [line.strip() for line in output_tail.splitlines() if line.strip(" =-\t")]
    for pattern in (r"\bFAIL\b", r"exitcode\s*:|traceback\s*:|Error\b"):
        found = [line for line in lines if re.search(pattern, line)]
        if found:
            return found[-1][:200]
    return (lines or [""])[-1][:200]


def _output(report: "RunReport", limit: int = 256 * 1024) -> str:
    """The end of what the gate printed (output.log; a Slurm job's slurm-<id>.out): its FAIL line can sit
    above a launcher's long traceback."""
    run_dir = Path(report.run_dir)
    files = [run_dir / "output.log"] if (run_dir / "output.log").is_file() else sorted(run_dir.glob("slurm-*.out"))
    return "\n".join(tail_text(path, limit) for path in files) or report.outcome.output_tail


def _harness(report: "RunReport", ev: str) -> list[Any]:
    """The harness's own records of ``ev`` with a finite time, oldest first."""
    recs = [r for r in report.outcome.history.of(ev) if r.get("source") == "harness"
            and isinstance(r.get("t"), (int, float)) and math.isfinite(r["t"])]
    return sorted(recs, key=lambda r: r["t"])


def _first_t(report: "RunReport", ev: str) -> float | None:
    recs = _harness(report, ev)
    return recs[0]["t"] if recs else None


def _finite(t: Any) -> bool:
    return isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)


def judge(report: "RunReport", gate: "GateConfig", *, healthy: bool) -> Cell:
    """The verdict of one gate run. ``healthy``: a run with no fault, where anything but a pass is a false alarm."""
    out = report.outcome
    fault = out.faults[0] if out.faults and not healthy else None
    cell = Cell(fault=None if fault is None else fault.label, kind=None if fault is None else fault.kind,
                verdict="error", reason="", gate_exit=out.exit_code, said=_said(_output(report)),
                run_dir=str(report.run_dir))
    if healthy and out.faults:
        cell.reason = f"a healthy run had faults ({', '.join(f.label for f in out.faults)})"
        return cell
    if not healthy and len(out.faults) != 1:
        cell.reason = f"a coverage run holds one fault, this one {len(out.faults)}"
        return cell
    if report.revert_failures:
        cell.reason = "revert failed: " + "; ".join(report.revert_failures)
        return cell
    broken = [d for d in out.diagnostics if d.startswith(("harness error", "interrupted"))]
    if broken:
        cell.reason = "; ".join(broken)
        return cell
    t_launch = _first_t(report, "launch")
    if t_launch is None:
        cell.reason = "no launch record: the gate never started"
        return cell
    if fault is not None and not fault.injected:
        cell.verdict = "untested"
        cell.reason = f"the fault did not act ({fault.status}{': ' + fault.error if fault.error else ''})"
        return cell
    if fault is not None and not _finite(fault.t_inject):
        cell.reason = f"the fault's injection has no time ({fault.t_inject!r})"
        return cell
    exits = _harness(report, "workload_exit")
    # The gate's answer is its first: a relaunch (the health relaunch after an excluded device) is the harness
    # playing a scheduler, not the pipeline running its gate again, and what that relaunch did after it (ran into
    # the deadline) changes nothing.
    if out.timed_out and not exits:
        cell.said = ""  # it never answered: its last line is whatever it was doing, the reason says what happened
        if gate.deadline_s is not None:
            cell.seconds = gate.deadline_s
            cell.verdict = "false_alarm" if healthy else "caught_at_deadline"
            cell.reason = f"still running at the deadline ({gate.deadline_s:g} s): the pipeline stops it as failed"
        else:
            cell.verdict = "false_alarm" if healthy else "hung"
            cell.reason = (f"never answered in {out.experiment.timeout_s:g} s; with no deadline nothing stops it and "
                           f"the launch waits")
        return cell
    code = exits[0].get("code") if exits else None
    if not exits or not isinstance(code, int) or isinstance(code, bool):
        cell.reason = ("the run ended before the gate answered: " + "; ".join(out.diagnostics)) if out.diagnostics \
            else "no record of the gate's end (workload_exit)"
        return cell
    t_end = exits[0]["t"]
    cell.gate_exit = code
    if healthy:
        cell.seconds = round(t_end - t_launch, 3)
        cell.verdict = "ok" if code == 0 else "false_alarm"
        cell.reason = "passed with no fault" if code == 0 else f"failed with no fault (exit {code})"
        return cell
    assert fault is not None and fault.t_inject is not None
    gone = fault.t_release if _finite(fault.t_release) else None
    if gone is not None and gone < t_end:
        cell.verdict = "untested"
        cell.reason = f"the fault was gone {t_end - gone:.3f} s before the gate answered (exit {code})"
        return cell
    if code == 0:
        cell.verdict = "missed"
        cell.reason = "passed with the fault there"
        return cell
    # A rank of the gate that had already ended before the fault acted: the gate was failing on its own.
    ended = [r["t"] for r in _harness(report, "worker_exit") if r["t"] < fault.t_inject]
    if fault.t_inject >= t_end or ended:
        cell.verdict = "untested"
        first = min([t_end, *ended])
        cell.reason = (f"the gate was failing (exit {code}) {fault.t_inject - first:.3f} s before the fault "
                       f"acted: a failure of its own, not a catch")
        return cell
    cell.seconds = round(t_end - max(t_launch, fault.t_inject), 3)
    cell.verdict = "caught"
    cell.reason = f"failed (exit {code}) {cell.seconds:.2f} s after the fault was there"
    return cell
