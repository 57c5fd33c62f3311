"""The one way the harness runs external commands: logged with their exact argv, so an operator can redo or undo by hand."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, Sequence

from chaos.errors import CapabilityError, FaultError


@dataclass
class CommandResult:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


class Shell:
    """Runs commands and reports each to ``log`` (the run's harness journal) as a ``cmd`` record.

    With ``dry_run`` it only logs what it would run and pretends success.
    """

    def __init__(self, log: Callable[..., None] | None = None, dry_run: bool = False) -> None:
        self._log = log
        self.dry_run = dry_run

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float = 30.0,
            input: str | None = None, env: dict[str, str] | None = None) -> CommandResult:
        """``env``: variables set for this command on top of the harness's own environment."""
        argv = [str(a) for a in argv]
        if self.dry_run:
            self._emit(argv, None, "", env)
            return CommandResult(argv, 0, "", "")
        if shutil.which(argv[0]) is None:
            raise CapabilityError(f"'{argv[0]}' is not installed (needed for: {shlex.join(argv)}); "
                                  f"run 'chaos doctor' to see how to install it")
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input,
                                  env=None if env is None else {**os.environ, **env})
        except subprocess.TimeoutExpired:
            self._emit(argv, -1, f"timed out after {timeout}s", env)
            raise FaultError(f"command timed out after {timeout}s: {shlex.join(argv)}") from None
        result = CommandResult(argv, proc.returncode, proc.stdout, proc.stderr)
        self._emit(argv, proc.returncode, proc.stderr.strip()[:500], env)
        if check and not result.ok:
            raise FaultError(f"command failed (exit {proc.returncode}): {shlex.join(argv)}: "
                             f"{proc.stderr.strip() or proc.stdout.strip()}")
        return result

    def _emit(self, argv: list[str], rc: int | None, stderr: str, env: dict[str, str] | None = None) -> None:
        if self._log is not None:
            # The variables go in front of the command line, so it can be pasted and run as it ran.
            prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items() if len(v) < 500)
            self._log("cmd", argv=argv, cmdline=prefix + shlex.join(argv), rc=rc, stderr=stderr,
                      dry_run=self.dry_run)
