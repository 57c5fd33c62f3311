"""A user's own DDP loop over torchdata's StatefulDataLoader (num_workers 2), resumed mid-epoch.

The loop most teams write once they need exact mid-epoch resume: a ``StatefulDistributedSampler``
(shuffled, seeded, ``set_epoch`` per epoch) under a ``StatefulDataLoader`` with worker processes,
whose ``state_dict()`` is saved with the model and optimizer in every checkpoint and restored on
resume. The indices each optimizer step consumed are recorded where the batch reaches the loop
(chaos.integrations.samples), so ``exactly_once`` judges what the stack really replays or skips.

    torchrun --standalone --nproc-per-node 2 workloads/stateful_loader.py --steps 40 --ckpt-every 5

``--no-loader-state`` leaves the loader's state out of the checkpoint (the usual first attempt):
a resume then starts its epoch over, and the samples since the epoch began are trained twice.

A loader's state is its own rank's: after a resume with a different number of ranks (an elastic
job that lost a node), each rank loading "its" file continues a partition that no longer exists.
``--reshard-loader`` handles that case: the checkpoint also records how many samples the whole
job consumed in the epoch, and a resume with another world size positions each rank's sampler at
that point of the epoch's global order instead of loading the per-rank states.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # userloop, from any cwd
if importlib.util.find_spec("chaos") is None:
    sys.path.insert(1, str(HERE.parent))  # chaos from the source tree

from trainkit import startup  # noqa: E402

startup.pause()  # before torch is imported; resumed once the model is wrapped (trainkit/startup.py)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from chaos import sdk  # noqa: E402
from chaos.integrations import require, samples  # noqa: E402
from userloop import arguments, begin, ckpt_root, newest_checkpoint, seal, staging, toy_problem  # noqa: E402

def parse(argv: list[str] | None):
    ap = arguments(__doc__.splitlines()[0], num_workers=2)
    ap.add_argument("--no-loader-state", action="store_true", help="do not save the loader's state (a resume starts its epoch over)")
    ap.add_argument("--reshard-loader", action="store_true",
                    help="on a resume with another world size, position the samplers from the job's consumed count "
                         "instead of loading each rank's loader state")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    StatefulDataLoader = require("torchdata.stateful_dataloader").StatefulDataLoader
    StatefulDistributedSampler = require("torchdata.stateful_dataloader.sampler").StatefulDistributedSampler
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    root = ckpt_root()
    data, model, opt = toy_problem(args)
    sampler = StatefulDistributedSampler(samples.Indexed(data), num_replicas=world, rank=rank, shuffle=True,
                                         seed=args.seed)
    loader = StatefulDataLoader(samples.Indexed(data), batch_size=args.batch_size, sampler=sampler,
                                num_workers=args.num_workers, collate_fn=samples.collate())
    tracker = samples.Tracker()

    step, epoch, consumed = 0, 0, 0  # consumed: samples the whole job trained in this epoch
    ckpt = newest_checkpoint(root)
    if ckpt is not None:
        state = torch.load(ckpt / "train.pt", weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step, epoch, consumed = state["step"], state["epoch"], state["consumed"]
        loader_file = ckpt / f"loader_rank{rank}.pt"
        if args.reshard_loader and state["world"] != world:
            # Each rank takes every world-th index of the epoch's order from where the job stopped.
            if consumed % world:
                raise SystemExit(f"cannot reshard: {consumed} samples consumed do not split over {world} ranks")
            sampler.load_state_dict({"yielded": consumed // world})
        elif loader_file.exists():
            own = torch.load(loader_file, weights_only=False)
            loader.load_state_dict(own["loader"])
            tracker.load_state_dict(own["tracker"])
    sdk.start(dataset_size=args.dataset_size, device="cpu", world_size=world)
    sdk.ckpt_load(step, str(ckpt) if ckpt else None)
    ddp = DistributedDataParallel(model)
    startup.resume()

    while step < args.steps:
        sampler.set_epoch(epoch)
        for batch_x, batch_y in tracker.track(loader):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(batch_x), batch_y)
            loss.backward()
            opt.step()
            step += 1
            consumed += len(batch_y) * world
            time.sleep(args.step_sleep)
            sdk.step(step, epoch=epoch, samples=tracker.take(), loss=float(loss))
            if step % args.ckpt_every == 0 or step == args.steps:
                save(root, step, epoch, consumed, model, opt, loader, tracker, rank, args)
            if step >= args.steps:
                break
        else:
            epoch, consumed = epoch + 1, 0
    sdk.final(step, digest=sdk.digest_state(model.state_dict(), opt.state_dict()))
    dist.destroy_process_group()
    return 0


def save(root: Path, step: int, epoch: int, consumed: int, model, opt, loader, tracker, rank: int, args) -> None:
    """Every rank writes its loader state, rank 0 the model; rank 0 seals the directory (userloop.seal)."""
    _final, tmp = staging(root, step)
    if rank == 0:
        t0 = begin(root, step)
        tmp.mkdir()
    dist.barrier()
    if not args.no_loader_state:
        torch.save({"loader": loader.state_dict(), "tracker": tracker.state_dict()}, tmp / f"loader_rank{rank}.pt")
    time.sleep(args.save_delay_s)  # slow storage: the loaders' states are written, the model not yet
    if rank == 0:
        torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step, "epoch": epoch,
                    "consumed": consumed, "world": dist.get_world_size()}, tmp / "train.pt")
    dist.barrier()
    if rank == 0:
        seal(root, step, "stateful_loader", args.keep, t0)
    dist.barrier()


if __name__ == "__main__":
    sys.exit(main())
