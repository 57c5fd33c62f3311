"""Helpers for a torchft loop: what each replica group did in each step, heals and lost steps, reported.

torchft (https://github.com/pytorch/torchft) keeps training when a replica group dies: the survivors
form a new quorum without it and go on; a group that comes back heals, fetching the live weights
from a peer, and rejoins. None of that is a torchrun restart, so the harness cannot see it from
outside. The loop reports it::

    from chaos.integrations import torchft as chaos_torchft
    report = chaos_torchft.Reporter(manager, replica_group=group, num_replica_groups=groups)
    manager = Manager(..., load_state_dict=report.on_heal(load_state_dict), ...)
    report.start(dataset_size=len(dataset))
    while manager.current_step() < steps:
        optimizer.zero_grad()                       # torchft's quorum (sync: a heal lands here)
        report.after_quorum()
        step = manager.current_step() + 1
        ...forward, backward...
        committed = manager.should_commit()
        if committed:
            inner_optimizer.step()
        report.step(step, committed, epoch=epoch, samples=indices, loss=loss, params=model.parameters())

Each record carries ``replica_group``. A committed step is a ``step`` event with the group's
``participants``, whether its own batch took part (``participating``: a group that healed in the step did
not contribute its gradient), and a ``digest`` of its weights (an exact checksum: replicas that agree have the
same one at the same step, chaos.checks.replicas_converge); a step torchft discarded
(``should_commit`` false: a peer died inside the all-reduce) is a ``discard`` event with the samples it
did not train; a heal is a ``heal`` event with the step the group was healed to.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from chaos import sdk
from chaos.integrations import require

_torchft = require("torchft")


def weights_checksum(params: Iterable[Any]) -> str:
    """An exact checksum of the parameters' bits (sum of their bit patterns as integers, as hex): two replicas
    with the same weights have the same one, and one flipped bit moves it."""
    import torch

    total = 0
    for p in params:
        flat = p.detach().reshape(-1).contiguous()
        ints = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16,
                torch.float16: torch.int16}.get(flat.dtype)
        if ints is None:
            raise TypeError(f"no integer view for {flat.dtype}")
        total += int(flat.view(ints).to(torch.int64).sum())
    return format(total & (2 ** 64 - 1), "016x")


class Reporter:
    """The event protocol for one replica group's process under a torchft ``Manager``."""

    def __init__(self, manager: Any, *, replica_group: int, num_replica_groups: int) -> None:
        self.manager = manager
        self.group = replica_group
        self.groups = num_replica_groups
        self._healed = False

    def start(self, *, dataset_size: int | None, device: str = "cpu") -> None:
        sdk.start(dataset_size=dataset_size, device=device, replica_group=self.group,
                  num_replica_groups=self.groups)

    def on_heal(self, load_state_dict: Callable[[Any], None]) -> Callable[[Any], None]:
        """Wrap the Manager's ``load_state_dict``: torchft calls it only to heal this group from a live peer."""
        def load(state_dict: Any) -> None:
            load_state_dict(state_dict)
            self._healed = True
        return load

    def after_quorum(self) -> None:
        """After ``optimizer.zero_grad()`` (the quorum): report a heal that just happened, with the step it reached."""
        if self._healed:
            self._healed = False
            sdk.emit("heal", step=int(self.manager.current_step()), replica_group=self.group,
                     participants=int(self.manager.num_participants()))

    def step(self, step: int, committed: bool, *, epoch: int, samples: list[int], loss: float,
             params: Iterable[Any]) -> None:
        if committed:
            # A group that healed in this step committed it with its peers' average, not its own batch's gradient.
            sdk.step(step, epoch=epoch, samples=samples, loss=loss, replica_group=self.group,
                     participants=int(self.manager.num_participants()),
                     participating=bool(self.manager.is_participating()), digest=weights_checksum(params))
        else:
            sdk.emit("discard", step=step, epoch=epoch, samples=samples, replica_group=self.group)
