"""The harness's error hierarchy: each error names what is wrong and how to fix it, and maps to an exit code."""

from __future__ import annotations

from dataclasses import dataclass


class ChaosError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with when this error ends a command."""

    exit_code = 3


class UsageError(ChaosError):
    """The command line or an input path is wrong (exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One thing wrong in an experiment file, located by file, line and YAML path."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where} {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ExperimentError(ChaosError):
    """An experiment file does not validate (exit 2). Carries every problem found, not just the first."""

    exit_code = 2

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class CapabilityError(ChaosError):
    """This host lacks something the experiment needs (root, netem, docker, a GPU) (exit 2).

    The message says what is missing and how to get it; the pytest plugin turns it into a skip.
    """

    exit_code = 2


class FaultError(ChaosError):
    """Injecting or reverting a fault failed (exit 3)."""


class HarnessError(ChaosError):
    """The harness itself failed (exit 3)."""
