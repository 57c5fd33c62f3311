"""What the stack workloads share: their toy problem, their checkpoint directory protocol
(stateful_loader.py, accelerate_loop.py) and the global-batch fix for a world-size change, so each
script shows only what its stack does differently.

A checkpoint is a ``step_N`` directory written under a temporary name, sealed with a manifest and
renamed into place (a reader never sees a half-written one under its name); retention prunes by
rename, then delete. A resume takes the newest directory whose manifest verifies and reports each
one it passes over.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import torch
from torch.utils.data import TensorDataset

from chaos import sdk
from chaos.checkpoint.manifest import build_manifest, fsync_path, verify_manifest, write_manifest
from chaos.integrations import saved_bytes

STEP_DIR = "step_{:06d}"


def arguments(description: str, num_workers: int) -> argparse.ArgumentParser:
    """The flags every stack workload takes; a script adds its own."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dataset-size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--num-workers", type=int, default=num_workers)
    ap.add_argument("--keep", type=int, default=2, help="committed checkpoints kept (older ones are pruned)")
    ap.add_argument("--step-sleep", type=float, default=0.05, help="stand-in for a step's real work")
    ap.add_argument("--save-delay-s", type=float, default=0.0,
                    help="slow storage: each save is held open this long part-way through its files")
    return ap


def add_global_batch(ap: argparse.ArgumentParser) -> None:
    """``--global-batch``: the fix for a resume at another world size, shared by the scripts that take it."""
    ap.add_argument("--global-batch", type=int, default=0,
                    help="samples per optimizer step over all processes, kept whatever the world size by "
                         "gradient accumulation (0: --batch-size per process, no accumulation)")


def accumulation(args: argparse.Namespace) -> int:
    """Micro-batches per optimizer step that keep ``--global-batch`` at this run's world size."""
    if not args.global_batch:
        return 1
    per_step = args.batch_size * int(os.environ.get("WORLD_SIZE", 1))
    if args.global_batch % per_step:
        raise SystemExit(f"--global-batch {args.global_batch} is not a multiple of {per_step} "
                         f"(--batch-size {args.batch_size} x world size {per_step // args.batch_size})")
    return args.global_batch // per_step


def toy_problem(args: argparse.Namespace) -> tuple[TensorDataset, torch.nn.Module, torch.optim.Optimizer]:
    """Seeded data, an MLP and its optimizer: the same on every rank and in every attempt."""
    gen = torch.Generator().manual_seed(args.seed)
    data = TensorDataset(torch.randn(args.dataset_size, 16, generator=gen),
                         torch.randn(args.dataset_size, 1, generator=gen))
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    return data, model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def ckpt_root() -> Path:
    root = Path(os.environ.get("CHAOS_CKPT_DIR", "ckpt"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def newest_checkpoint(root: Path) -> Path | None:
    """The newest step directory whose manifest verifies; each torn or half-written one passed over is reported."""
    for entry in sorted(root.glob("step_*"), reverse=True):
        problems = verify_manifest(entry) if entry.is_dir() else ["not a directory"]
        if not problems:
            return entry
        sdk.ckpt_reject(str(entry), "; ".join(problems)[:300])
    return None


def staging(root: Path, step: int) -> tuple[Path, Path]:
    """(the step's final directory, the temporary one it is written under)."""
    return root / STEP_DIR.format(step), root / f".tmp-{STEP_DIR.format(step)}"


def seal(root: Path, step: int, fmt: str, keep: int, t0: float) -> None:
    """On one process, after every rank wrote into the temporary directory: fsync, seal, rename into
    place, report the commit, prune beyond ``keep``."""
    final, tmp = staging(root, step)
    for f in tmp.rglob("*"):
        if f.is_file():
            fsync_path(f)
    write_manifest(tmp, build_manifest(tmp, step, format=fmt))
    os.replace(tmp, final)
    fsync_path(root)
    sdk.ckpt_commit(step, str(final), bytes=saved_bytes(final), seconds=time.time() - t0)
    for old in sorted(root.glob("step_*"))[:-keep]:
        # Prune by rename first: a reader never sees a half-deleted checkpoint under its name.
        gone = root / f".pruned-{old.name}"
        os.replace(old, gone)
        shutil.rmtree(gone, ignore_errors=True)


def begin(root: Path, step: int) -> float:
    """On the same process as ``seal``, before any rank writes: report the save and clear its temporary directory."""
    final, tmp = staging(root, step)
    sdk.ckpt_begin(step, str(final))
    shutil.rmtree(tmp, ignore_errors=True)
    return time.time()


def stop_if_not_finite(parameters, step: int) -> None:
    """The user's remedy for a NaN (the HF Trainer and Accelerate have none): before the optimizer steps, the
    gradients (already averaged over the ranks by DDP, so every rank sees the same verdict and no extra
    collective is needed) must be finite; otherwise the rank names the step and raises, every rank does the
    same, and torchrun restarts the job from the last checkpoint, which was saved before the bad step."""
    import math

    grads = [p.grad.detach().reshape(-1) for p in parameters if p.grad is not None]
    norm = float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0
    if math.isfinite(norm):
        return
    sdk.health(source="guard", code="nonfinite", device=int(os.environ.get("LOCAL_RANK", "0")), action="restart",
               step=step, grad_norm=str(norm))
    raise FloatingPointError(f"rank {os.environ.get('RANK', '0')}: step {step}: gradient norm {norm}; stopping before "
                             f"the optimizer applies it, for a restart from the last checkpoint")
