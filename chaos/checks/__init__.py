"""Built-in checks; each kind is one module. Third parties register through the ``chaos.checks`` entry-point group."""

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome

__all__ = ["Check", "CheckConfig", "CheckResult", "FaultRecord", "RunOutcome"]
