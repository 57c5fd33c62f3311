"""What the Kubernetes faults share: the job node they strike, checked before launch."""

from __future__ import annotations

from pydantic import Field

from chaos.errors import CapabilityError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.context import RunContext


class KubeNodeConfig(FaultConfig):
    node: int = Field(default=1, ge=0)
    """The job node struck (its Job's live pod): node<node>."""


class KubeNodeFault(Fault):
    """A fault through the cluster on one node of the job; refused before launch for a node the job does not have."""

    needs_target = ("kubernetes",)

    def check(self, run: RunContext) -> None:
        node = self.config.node  # type: ignore[attr-defined]
        nodes = getattr(run.target, "node_count", 0)
        if node >= nodes:
            raise CapabilityError(f"{self.label}: node {node} does not exist (the target has {nodes} node(s))")
