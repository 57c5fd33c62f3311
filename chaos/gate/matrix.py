"""The coverage matrix of a health gate: its cells, what the plan requires, the verdict, and the matrix as
JSON (coverage.json, read back as the same type), Markdown (coverage.md) and a terminal table."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.gate.cell import VERDICT_TEXT, Cell
from chaos.spec.gate import GateConfig

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 3


@dataclass
class Coverage:
    """What a coverage run found, and what its plan requires (``gate``)."""

    name: str
    gate: GateConfig
    gate_command: str
    target: str
    faults: list[Cell] = field(default_factory=list)
    """One cell per listed fault, in the plan's order."""
    healthy: list[Cell] = field(default_factory=list)
    calibration: Cell | None = None
    listed: list[str] = field(default_factory=list)
    """Every fault the plan lists (a cell missing for one, a run cut short, counts as not caught)."""
    folder: str = ""

    @property
    def caught(self) -> list[Cell]:
        return [c for c in self.faults if c.caught]

    @property
    def coverage(self) -> float | None:
        """Caught over listed: a fault with no cell, or an untested one, is not covered."""
        n = len(self.listed) or len(self.faults)
        return len(self.caught) / n if n else None

    @property
    def false_alarms(self) -> list[Cell]:
        return [c for c in self.healthy if c.verdict == "false_alarm"]

    def problems(self) -> tuple[int, list[str]]:
        """The exit code (0 every requirement holds, 1 one does not, 3 a run could not be judged) and why."""
        why: list[str] = []
        errors = [c for c in [*self.faults, *self.healthy, *([self.calibration] if self.calibration else [])]
                  if c.verdict == "error"]
        if self.calibration is not None and self.calibration.verdict != "ok":
            why.append(f"calibration: the gate does not pass on the healthy target ({self.calibration.reason}); "
                       f"nothing else was run")
        calibrated = self.calibration is None or self.calibration.verdict == "ok"
        if self.gate.calibrate and self.calibration is None:
            why.append("the plan calibrates the gate first, and no calibration run was judged")
        if not self.healthy and calibrated:
            why.append("no healthy run was judged: a false alarm cannot be ruled out")
        elif calibrated and len(self.healthy) < self.gate.healthy_runs:
            why.append(f"{len(self.healthy)} of the {self.gate.healthy_runs} healthy runs were judged")
        if len(self.false_alarms) > self.gate.max_false_alarms:
            why.append(f"{len(self.false_alarms)} false alarm(s) in {len(self.healthy)} healthy run(s) "
                       f"(at most {self.gate.max_false_alarms}): {self.false_alarms[0].reason}")
        cov = self.coverage
        if self.gate.require_coverage is not None and (cov is None or cov < self.gate.require_coverage):
            why.append(f"coverage {0 if cov is None else cov:.0%} below the required {self.gate.require_coverage:.0%}")
        by_label: dict[str | None, Cell] = {}
        for c in self.faults:  # a label twice (a plan the loader refuses): the worse cell stands
            if c.fault not in by_label or not c.caught:
                by_label[c.fault] = c
        for name in self.gate.require_caught:
            cell = by_label.get(name)
            if cell is None or not cell.caught:
                why.append(f"{name} must be caught: {VERDICT_TEXT[cell.verdict] if cell else 'not run'}"
                           + (f" ({cell.reason})" if cell else ""))
        missing = [name for name in self.listed if name not in by_label]
        if missing:
            why.append(f"not run: {', '.join(missing)}")
        if errors:
            why += [f"{c.fault or 'healthy run'}: {c.reason}" for c in errors]
            return EXIT_ERROR, why
        return (EXIT_FAIL if why else EXIT_PASS), why

    # ------------------------------------------------------------------ the matrix written and read back

    def to_json(self) -> dict[str, Any]:
        code, why = self.problems()
        return {"name": self.name, "gate": self.gate.model_dump(), "gate_command": self.gate_command,
                "target": self.target, "listed": self.listed, "folder": self.folder,
                "faults": [c.to_json() for c in self.faults], "healthy": [c.to_json() for c in self.healthy],
                "calibration": self.calibration.to_json() if self.calibration else None,
                "coverage": self.coverage, "exit_code": code, "problems": why}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Coverage":
        return cls(name=data["name"], gate=GateConfig.model_validate(data["gate"]), gate_command=data["gate_command"],
                   target=data["target"], listed=list(data.get("listed", [])), folder=data.get("folder", ""),
                   faults=[Cell.from_json(c) for c in data["faults"]],
                   healthy=[Cell.from_json(c) for c in data["healthy"]],
                   calibration=Cell.from_json(data["calibration"]) if data.get("calibration") else None)

    def write(self, folder: Path) -> None:
        (folder / "coverage.json").write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        (folder / "coverage.md").write_text(self.markdown(), encoding="utf-8")

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(fault, verdict, seconds, what the gate said / why) per cell, healthy runs last."""
        out = []
        for c in self.faults + self.healthy:
            secs = "" if c.seconds is None else f"{c.seconds:.2f}"
            out.append((c.fault or "(no fault)", VERDICT_TEXT[c.verdict], secs, c.said or c.reason))
        return out

    def markdown(self) -> str:
        code, why = self.problems()
        cov = self.coverage
        lines = [f"# Coverage of `{self.gate_command}` on {self.target}", "",
                 f"{len(self.caught)} of {len(self.listed) or len(self.faults)} faults caught "
                 f"({'n/a' if cov is None else f'{cov:.0%}'}); {len(self.false_alarms)} false alarm(s) in "
                 f"{len(self.healthy)} healthy run(s). Verdict: {'PASS' if code == 0 else 'FAIL' if code == 1 else 'ERROR'}.",
                 "", "| fault | verdict | seconds | the gate said / why |", "|---|---|---|---|"]
        for fault, verdict, secs, said in self.rows():
            lines.append(f"| {fault} | {verdict} | {secs} | {said.replace('|', '/')} |")
        if why:
            lines += ["", *[f"- {w}" for w in why]]
        return "\n".join(lines) + "\n"
