"""Process-group setup and teardown, and the small collective vocabulary checkpointing needs."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

import torch
import torch.distributed as dist


@dataclass
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(timeout_s: float, store: dist.Store | None = None) -> DistEnv:
    """Join the process group: nccl on ``cuda:LOCAL_RANK`` when CUDA is present, else gloo on CPU.

    Without torchrun's environment (``python ddp.py``) this becomes a one-process group.
    ``timeout_s`` bounds both the rendezvous and every later collective, so a dead or hung peer
    surfaces as an exception (and a torchrun restart) instead of gloo's 30-minute default. ``store``: the
    rendezvous store to join through (an in-process restart's own, per iteration) instead of torchrun's.
    """
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(_free_port()))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        torch.set_num_threads(1)  # small CPU boxes, and bit-exact reductions
        device, backend = torch.device("cpu"), "gloo"
    timeout = timedelta(seconds=timeout_s)
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timeout}
    if backend == "nccl":
        kwargs["device_id"] = device
    store = store if store is not None else attempt_store(timeout)
    if store is not None:
        kwargs.update(store=store, rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    dist.init_process_group(**kwargs)
    return DistEnv(dist.get_rank(), dist.get_world_size(), local_rank, device, backend)


def attempt_store(timeout: timedelta) -> dist.Store | None:
    """torchrun's shared store, with keys private to this restart attempt (None outside torchrun).

    torchrun (2.x, c10d/--standalone rendezvous) keeps ONE TCPStore alive across worker restarts
    and hands it to the workers with ``TORCHELASTIC_USE_AGENT_STORE=True``; ``env://`` then uses it
    without any per-attempt prefix. The process-group keys of the killed attempt (every rank's gloo
    address under ``default_pg/0/...``) are still there when the restarted workers rendezvous, so a
    rank can read a dead peer's address: ``connectFullMesh ... Connection refused``, or a hang in
    ``init_process_group``. Prefixing the keys with the restart count gives each attempt a clean slate.
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != str(True):
        return None
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timeout)
    return dist.PrefixStore(f"chaos/attempt_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def destroy_distributed() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class Comm(Protocol):
    """What the checkpoint manager needs from its peers (satisfied by a process group or by one process)."""

    rank: int
    world_size: int

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, by rank (also a barrier)."""

    @property
    def group(self) -> Any:
        """The torch process group to hand to collective libraries (DCP), or None for the default."""


class LocalComm:
    """One process, no process group: for unit tests and single-process tools."""

    rank = 0
    world_size = 1
    group = None

    def broadcast(self, obj: Any) -> Any:
        return obj

    def all_gather(self, obj: Any) -> list[Any]:
        return [obj]


class GroupComm:
    """Object collectives over a torch process group (``None``: the default group)."""

    def __init__(self, group: Any = None) -> None:
        self._group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

    @property
    def group(self) -> Any:
        return self._group

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        dist.broadcast_object_list(box, src=dist.get_global_rank(self._group, 0) if self._group else 0, group=self._group)
        return box[0]

    def all_gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self._group)
        return out
