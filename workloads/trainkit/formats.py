"""Checkpoint formats: plain torch.save for DDP, torch.distributed.checkpoint (DCP) for FSDP."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .data import GlobalCursorSampler, mix_seed
from .dist import Comm
from .rng import capture_rng, restore_rng, seed_rank


@dataclass
class AppState:
    """Everything a checkpoint captures, by reference to the live training objects."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    sampler: GlobalCursorSampler
    seed: int
    rank: int


def clone_tree(obj: Any) -> Any:
    """A private copy of nested containers of tensors (DTensors stay DTensors), moved to CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: clone_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clone_tree(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(clone_tree(v) for v in obj)
    return obj


def save_fsync(obj: Any, path: Path) -> None:
    """torch.save to ``path`` and fsync it before returning."""
    with open(path, "wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())


def rng_file(rank: int) -> str:
    return f"rng_rank{rank}.pt"


def restore_rank_rng(directory: Path, app: AppState, step: int) -> None:
    """This rank's saved RNG, or (a rank the checkpoint did not have) a fresh seeding from seed and step."""
    path = directory / rng_file(app.rank)
    if path.exists():
        restore_rng(torch.load(path, map_location="cpu", weights_only=True))
    else:
        seed_rank(mix_seed(app.seed, step), app.rank)


def unwrap(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)


class DdpFormat:
    """``state.pt`` (rank 0: model, optimizer, scheduler, sampler, step) + ``rng_rank{r}.pt`` per rank."""

    name = "ddp-torch-save"
    state_file = "state.pt"

    def stage(self, app: AppState, step: int, *, copy: bool) -> dict[str, Any]:
        staged: dict[str, Any] = {"rng": capture_rng()}
        if app.rank == 0:
            staged["train"] = {
                "model": unwrap(app.model).state_dict(),
                "optim": app.optimizer.state_dict(),
                "sched": app.scheduler.state_dict(),
                "sampler": app.sampler.state_dict(),
                "step": step,
            }
        return clone_tree(staged) if copy else staged

    def write_collective(self, staged: Any, directory: Path, comm: Comm) -> None:
        """Nothing collective: every rank writes plain files."""

    def write_local(self, staged: dict[str, Any], directory: Path, rank: int) -> None:
        if "train" in staged:
            save_fsync(staged["train"], directory / self.state_file)
        save_fsync(staged["rng"], directory / rng_file(rank))

    def load(self, directory: Path, app: AppState, comm: Comm) -> int:
        state = torch.load(directory / self.state_file, map_location="cpu", weights_only=True)
        unwrap(app.model).load_state_dict(state["model"])
        self.load_optimizer(app, state["optim"])
        app.scheduler.load_state_dict(state["sched"])
        app.sampler.load_state_dict(state["sampler"])
        restore_rank_rng(directory, app, state["step"])
        return int(state["step"])

    def load_optimizer(self, app: AppState, state: dict[str, Any]) -> None:
        app.optimizer.load_state_dict(state)


class DcpFormat:
    """DCP shards of model + optimizer (``.metadata``, ``__<r>_0.distcp``), ``trainer.pt`` (rank 0), RNG per rank."""

    name = "dcp"
    trainer_file = "trainer.pt"

    def stage(self, app: AppState, step: int, *, copy: bool) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(app.model, app.optimizer)
        staged: dict[str, Any] = {"dcp": {"model": model_sd, "optim": optim_sd}, "rng": capture_rng()}
        if app.rank == 0:
            staged["train"] = {"sched": app.scheduler.state_dict(), "sampler": app.sampler.state_dict(), "step": step}
        return clone_tree(staged) if copy else staged

    def write_collective(self, staged: dict[str, Any], directory: Path, comm: Comm) -> None:
        import torch.distributed.checkpoint as dcp

        writer = dcp.FileSystemWriter(str(directory), sync_files=True)
        dcp.save(staged["dcp"], storage_writer=writer, process_group=comm.group)

    def write_local(self, staged: dict[str, Any], directory: Path, rank: int) -> None:
        if "train" in staged:
            save_fsync(staged["train"], directory / self.trainer_file)
        save_fsync(staged["rng"], directory / rng_file(rank))

    def load(self, directory: Path, app: AppState, comm: Comm) -> int:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        model_sd, optim_sd = get_state_dict(app.model, app.optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=str(directory), process_group=comm.group)
        set_state_dict(app.model, app.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        train = torch.load(directory / self.trainer_file, map_location="cpu", weights_only=True)
        app.scheduler.load_state_dict(train["sched"])
        app.sampler.load_state_dict(train["sampler"])
        restore_rank_rng(directory, app, train["step"])
        return int(train["step"])
