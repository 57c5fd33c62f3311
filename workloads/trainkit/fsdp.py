"""FSDP2 (``fully_shard``) flavour of the trainer: sharded parameters, DCP checkpoints."""

from __future__ import annotations

from torch import nn

from .checkpoint import CheckpointFormat
from .formats import DcpFormat
from .trainer import Trainer


class FsdpTrainer(Trainer):
    def parallelize(self, model: nn.Module) -> nn.Module:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        assert self.env is not None
        mesh = init_device_mesh(self.env.device.type, (self.env.world_size,))
        for layer in model.layers:  # type: ignore[union-attr]
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    def build_format(self) -> CheckpointFormat:
        return DcpFormat()

    def build_replica_check(self) -> None:
        if self.cfg.replica_check_every:
            raise ValueError("--replica-check-every compares replicas, and FSDP shards the parameters: each rank "
                             "holds its own part, so there are none to compare (use it with the DDP workload)")
        return None
