"""A user's own DDP loop over torchdata's StatefulDataLoader (num_workers 2), resumed mid-epoch.

The loop most teams write once they need exact mid-epoch resume: a ``StatefulDistributedSampler``
(shuffled, seeded, ``set_epoch`` per epoch) under a ``StatefulDataLoader`` with worker processes,
whose ``state_dict()`` is saved with the model and optimizer in every checkpoint and restored on
resume. The indices each optimizer step consumed are recorded where the batch reaches the loop
(chaos.integrations.samples), so ``exactly_once`` judges what the stack really replays or skips.

    torchrun --standalone --nproc-per-node 2 workloads/stateful_loader.py --steps 40 --ckpt-every 5

``--no-loader-state`` leaves the loader's state out of the checkpoint (the usual first attempt):
a resume then starts its epoch over, and the samples since the epoch began are trained twice.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

if importlib.util.find_spec("chaos") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # chaos from the source tree

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from chaos import sdk  # noqa: E402
from chaos.checkpoint.manifest import build_manifest, fsync_path, verify_manifest, write_manifest  # noqa: E402
from chaos.integrations import require, samples  # noqa: E402

STEP_DIR = "step_{:06d}"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dataset-size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--keep", type=int, default=2, help="committed checkpoints kept (older ones are pruned)")
    ap.add_argument("--step-sleep", type=float, default=0.05, help="stand-in for a step's real work")
    ap.add_argument("--no-loader-state", action="store_true", help="do not save the loader's state (a resume starts its epoch over)")
    return ap.parse_args(argv)


def newest_checkpoint(root: Path) -> Path | None:
    """The newest step directory whose manifest verifies (a torn or half-written one is passed over)."""
    for entry in sorted(root.glob("step_*"), reverse=True):
        if entry.is_dir() and not verify_manifest(entry, check_hashes=True):
            return entry
        if entry.is_dir():
            sdk.ckpt_reject(str(entry), "; ".join(verify_manifest(entry))[:300])
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    StatefulDataLoader = require("torchdata.stateful_dataloader").StatefulDataLoader
    StatefulDistributedSampler = require("torchdata.stateful_dataloader.sampler").StatefulDistributedSampler
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    root = Path(os.environ.get("CHAOS_CKPT_DIR", "ckpt"))
    root.mkdir(parents=True, exist_ok=True)

    gen = torch.Generator().manual_seed(args.seed)
    data = TensorDataset(torch.randn(args.dataset_size, 16, generator=gen), torch.randn(args.dataset_size, 1, generator=gen))
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sampler = StatefulDistributedSampler(samples.Indexed(data), num_replicas=world, rank=rank, shuffle=True,
                                         seed=args.seed)
    loader = StatefulDataLoader(samples.Indexed(data), batch_size=args.batch_size, sampler=sampler,
                                num_workers=args.num_workers, collate_fn=samples.collate())
    tracker = samples.Tracker()

    step, epoch = 0, 0
    ckpt = newest_checkpoint(root)
    if ckpt is not None:
        state = torch.load(ckpt / "train.pt", weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step, epoch = state["step"], state["epoch"]
        loader_file = ckpt / f"loader_rank{rank}.pt"
        if loader_file.exists():
            own = torch.load(loader_file, weights_only=False)
            loader.load_state_dict(own["loader"])
            tracker.load_state_dict(own["tracker"])
    sdk.start(dataset_size=args.dataset_size, device="cpu", world_size=world)
    sdk.ckpt_load(step, str(ckpt) if ckpt else None)
    ddp = DistributedDataParallel(model)

    while step < args.steps:
        sampler.set_epoch(epoch)
        for batch_x, batch_y in tracker.track(loader):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(batch_x), batch_y)
            loss.backward()
            opt.step()
            step += 1
            time.sleep(args.step_sleep)
            sdk.step(step, epoch=epoch, samples=tracker.take(), loss=float(loss))
            if step % args.ckpt_every == 0 or step == args.steps:
                save(root, step, epoch, model, opt, loader, tracker, rank, args)
            if step >= args.steps:
                break
        else:
            epoch += 1
    sdk.final(step, digest=sdk.digest_state(model.state_dict(), opt.state_dict()))
    dist.destroy_process_group()
    return 0


def save(root: Path, step: int, epoch: int, model, opt, loader, tracker, rank: int, args: argparse.Namespace) -> None:
    """Every rank writes its loader state, rank 0 the model; rank 0 seals the directory and renames it into place."""
    final = root / STEP_DIR.format(step)
    tmp = root / f".tmp-{STEP_DIR.format(step)}"
    t0 = time.time()
    if rank == 0:
        sdk.ckpt_begin(step, str(final))
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    dist.barrier()
    if not args.no_loader_state:
        torch.save({"loader": loader.state_dict(), "tracker": tracker.state_dict()}, tmp / f"loader_rank{rank}.pt")
    if rank == 0:
        torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step, "epoch": epoch},
                   tmp / "train.pt")
    dist.barrier()
    if rank == 0:
        for f in tmp.iterdir():
            fsync_path(f)
        write_manifest(tmp, build_manifest(tmp, step, format="stateful_loader"))
        os.replace(tmp, final)
        fsync_path(root)
        size = sum(f.stat().st_size for f in final.iterdir())
        sdk.ckpt_commit(step, str(final), bytes=size, seconds=time.time() - t0)
        for old in sorted(root.glob("step_*"))[:-args.keep]:
            # Prune by rename first: a reader never sees a half-deleted checkpoint under its name.
            gone = root / f".pruned-{old.name}"
            os.replace(old, gone)
            shutil.rmtree(gone, ignore_errors=True)
    dist.barrier()


if __name__ == "__main__":
    sys.exit(main())
