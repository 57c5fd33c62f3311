"""A user's Lightning script: DDP on CPU, ModelCheckpoint every few steps, resumed with ckpt_path="last".

The shape of Lightning's docs: a LightningModule over the toy problem of userloop.py, a shuffled
DataLoader (Lightning injects the DistributedSampler), ``ModelCheckpoint(every_n_train_steps=N,
save_last=True)`` and ``trainer.fit(model, loader, ckpt_path="last")``, which resumes from
``last.ckpt`` when there is one. The two lines that make it a chaos workload are marked ``chaos:``.

    torchrun --standalone --nproc-per-node 2 workloads/lightning_ddp.py --steps 40 --ckpt-every 5

``--stateful-loader`` uses torchdata's StatefulDataLoader: Lightning then saves the loader's state
in the checkpoint and restores it (a plain DataLoader cannot resume mid-epoch, and Lightning warns).

``--reshard-loader`` (with ``--stateful-sampler``) and ``--global-batch`` make a resume at another
world size exact: the sampler is positioned from the samples the job consumed, and a step trains the
same samples at any world size (``accumulate_grad_batches``).

``--async-checkpoint`` adds Lightning's ``AsyncCheckpointIO`` plugin: each checkpoint is copied on the
training thread and written by a background thread. ``--resume newest`` resumes from the newest step's
file that is whole instead of ``last.ckpt``.

``--save-delay-s`` stands in for a slow checkpoint filesystem (each file written onto it is held
half-written that long), and ``--tmpdir`` says where the process's temporary files go: Lightning
writes each ``.ckpt`` to a temporary file and moves it into place, which is a rename on the same
filesystem and a copy across two.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import multiprocessing.util
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # userloop, from any cwd
if importlib.util.find_spec("chaos") is None:
    sys.path.insert(1, str(HERE.parent))  # chaos from the source tree

from trainkit import startup  # noqa: E402

startup.pause()  # before torch is imported; resumed once the model is wrapped (trainkit/startup.py)

import torch  # noqa: E402

from chaos.integrations import require  # noqa: E402
from userloop import accumulation, add_global_batch, arguments, toy_problem  # noqa: E402

L = require("lightning")
from chaos.integrations.lightning import ChaosCallback, Indexed  # noqa: E402


class Examples(torch.utils.data.Dataset):
    """The toy problem's tensors as dict examples."""

    def __init__(self, data: torch.utils.data.TensorDataset) -> None:
        self.x, self.y = data.tensors

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i]}


class Regression(L.LightningModule):
    def __init__(self, model: torch.nn.Module, step_sleep: float) -> None:
        super().__init__()
        self.model = model
        self.step_sleep = step_sleep

    def training_step(self, batch, batch_idx):
        loss = torch.nn.functional.mse_loss(self.model(batch["x"]), batch["y"])
        time.sleep(self.step_sleep)  # stand-in for a step's real work
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


class SamplerEpochOnLoad(L.Callback):
    """Sets the sampler's epoch from the checkpoint while Lightning restores it, before the resumed iterator exists."""

    def __init__(self, sampler) -> None:
        self.sampler = sampler

    def on_load_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self.sampler.set_epoch(int(checkpoint["epoch"]))


class ReshardLoader(L.Callback):
    """On a resume at another world size, positions the sampler where the job stopped instead of loading the
    loader's state: that state is rank 0's (Lightning saves the checkpoint from rank 0), and a sampler's count
    of the indices it yielded means a place in the epoch only at the world size that counted it."""

    def __init__(self, sampler, batch_size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        checkpoint["world_size"] = trainer.world_size

    def on_load_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        saved = checkpoint.get("world_size", trainer.world_size)
        if saved == trainer.world_size:
            return  # Lightning restores the loader's state as it was saved
        # The batches each rank trained in the checkpoint's epoch (processed: its last one is in the checkpoint).
        trained = checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["processed"]
        consumed = trained * self.batch_size * saved
        if consumed % trainer.world_size:
            raise SystemExit(f"cannot reshard: {consumed} samples consumed do not split over {trainer.world_size} ranks")
        checkpoint["loops"]["fit_loop"]["state_dict"].pop("combined_loader", None)
        self.sampler.load_state_dict({"yielded": consumed // trainer.world_size})


def newest_whole(root: Path) -> str | None:
    """The newest step's checkpoint file that is whole (its zip directory and CRCs check out), for
    ``fit(ckpt_path=...)``: the resume rule that trusts no pointer, where ``"last"`` trusts ``last.ckpt``."""
    found = []
    for path in root.glob("*.ckpt"):
        match = re.search(r"step=(\d+)", path.name)
        if match and not path.name.startswith("last") and not path.is_symlink():
            found.append((int(match.group(1)), path))
    for _step, path in sorted(found, reverse=True):
        try:
            with zipfile.ZipFile(path) as zf:
                if zf.testzip() is None:
                    return str(path)
        except (OSError, zipfile.BadZipFile):
            continue  # a save cut short: the one before it
    return None


def slow_storage(root: Path, delay_s: float) -> None:
    """A slow checkpoint filesystem: each file written onto ``root``'s filesystem stays half-written for ``delay_s``.

    Lightning's ``_atomic_save`` writes through fsspec into a temporary file in $TMPDIR and moves it
    into place on commit (``shutil.move``): the slow write is the temporary file's when $TMPDIR is on
    the checkpoints' filesystem, and the move's copy when it is not. Both are slowed here, nothing else."""
    device = os.stat(root).st_dev

    def on_root(path: str) -> bool:
        return os.stat(os.path.dirname(os.path.abspath(path)) or ".").st_dev == device

    def half_then_rest(write, flush, data: bytes) -> int:
        half = len(data) // 2
        write(data[:half])
        flush()
        time.sleep(delay_s)
        write(data[half:])
        return len(data)

    local = require("fsspec.implementations.local").LocalFileOpener
    plain_write = local.write

    def write(self, data, *args, **kwargs):
        target = getattr(self, "temp", None) or self.path
        if "w" not in self.mode or not isinstance(data, (bytes, bytearray, memoryview)) or not on_root(target):
            return plain_write(self, data, *args, **kwargs)
        return half_then_rest(self.f.write, self.f.flush, bytes(data))

    plain_copyfile = shutil.copyfile

    def copyfile(src, dst, *, follow_symlinks=True):
        if not on_root(os.fspath(dst)):
            return plain_copyfile(src, dst, follow_symlinks=follow_symlinks)
        with open(src, "rb") as fsrc, open(dst, "wb") as fdst:
            half_then_rest(fdst.write, fdst.flush, fsrc.read())
        return dst

    local.write = write
    shutil.copyfile = copyfile  # shutil.move's cross-filesystem copy (copy2) looks it up here


def main(argv: list[str] | None = None) -> int:
    ap = arguments(__doc__.splitlines()[0], num_workers=2)
    ap.add_argument("--stateful-loader", action="store_true", help="torchdata StatefulDataLoader (resumable mid-epoch)")
    ap.add_argument("--stateful-sampler", action="store_true",
                    help="the loader over torchdata's StatefulDistributedSampler, use_distributed_sampler=False")
    ap.add_argument("--epoch-on-load", action="store_true",
                    help="with --stateful-sampler: set the sampler's epoch from the checkpoint as it is loaded "
                         "(Lightning creates the resumed iterator before it sets the epoch: Lightning#21938)")
    ap.add_argument("--save-last", choices=["true", "link"], default="true",
                    help="ModelCheckpoint(save_last=...): 'true' writes last.ckpt after the step's own file, "
                         "'link' makes it a link to that file")
    ap.add_argument("--async-checkpoint", action="store_true",
                    help="Trainer(plugins=[AsyncCheckpointIO()]): each checkpoint written by a thread while training goes on")
    ap.add_argument("--resume", choices=["last", "newest"], default="last",
                    help="fit(ckpt_path=...): 'last' (last.ckpt, Lightning's docs) or 'newest' (the newest step's file "
                         "that is whole, whatever last.ckpt says)")
    ap.add_argument("--tmpdir", default=None,
                    help="where this process's temporary files go (what $TMPDIR sets); relative: inside the "
                         "checkpoint directory")
    ap.add_argument("--reshard-loader", action="store_true",
                    help="with --stateful-sampler: on a resume at another world size, position the sampler from "
                         "the samples the job consumed instead of loading rank 0's loader state")
    ap.add_argument("--detect-anomaly", action="store_true",
                    help="Trainer(detect_anomaly=True): autograd's anomaly mode raises in the backward that makes a "
                         "NaN, on the rank that made it (Lightning's own answer to a NaN; it costs every step)")
    add_global_batch(ap)  # as Trainer(accumulate_grad_batches=...)
    args = ap.parse_args(argv)
    if (args.reshard_loader or args.epoch_on_load) and not args.stateful_sampler:
        ap.error("--reshard-loader and --epoch-on-load act on the sampler of --stateful-sampler")
    ckpt_dir = Path(os.environ.get("CHAOS_CKPT_DIR", "lightning-ckpt"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    if args.tmpdir:
        # This rank's own directory under --tmpdir (relative: inside the checkpoint directory), emptied at start
        # and removed at exit: a save killed mid-move leaves its temporary file behind, and /dev/shm is the host's.
        run = hashlib.sha1(str(ckpt_dir.resolve()).encode()).hexdigest()[:12]
        tmp = ckpt_dir / args.tmpdir / f".chaos-tmp-{run}-rank{os.environ.get('RANK', '0')}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        atexit.register(shutil.rmtree, tmp, True)
        # multiprocessing (the loader's workers) keeps its AF_UNIX sockets in the temporary directory, and a
        # socket's path has at most 107 bytes: it keeps the system's, chosen before the change.
        multiprocessing.util.get_temp_dir()
        tempfile.tempdir = str(tmp)
    if args.save_delay_s:
        slow_storage(ckpt_dir, args.save_delay_s)
    L.seed_everything(args.seed, workers=True, verbose=False)
    data, model, _ = toy_problem(args)
    loader_cls = require("torchdata.stateful_dataloader").StatefulDataLoader if args.stateful_loader \
        else torch.utils.data.DataLoader
    dataset = Indexed(Examples(data))  # chaos: Indexed
    if args.stateful_sampler:
        sampler = require("torchdata.stateful_dataloader.sampler").StatefulDistributedSampler(
            dataset, num_replicas=int(os.environ.get("WORLD_SIZE", 1)), rank=int(os.environ.get("RANK", 0)),
            shuffle=True, seed=args.seed)
        loader = loader_cls(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.num_workers)
        callbacks = [SamplerEpochOnLoad(sampler)] if args.epoch_on_load else []
        callbacks += [ReshardLoader(sampler, args.batch_size)] if args.reshard_loader else []
    else:  # Lightning swaps in a DistributedSampler (use_distributed_sampler=True)
        callbacks = []
        loader = loader_cls(dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers)
    checkpoints = L.pytorch.callbacks.ModelCheckpoint(
        dirpath=str(ckpt_dir), every_n_train_steps=args.ckpt_every,
        save_top_k=args.keep, monitor="step", mode="max",
        save_last=True if args.save_last == "true" else args.save_last)
    devices = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    trainer = L.Trainer(accelerator="cpu", devices=devices, num_nodes=int(os.environ.get("WORLD_SIZE", 1)) // devices,
                        strategy="ddp", accumulate_grad_batches=accumulation(args),
                        max_steps=args.steps, callbacks=[ChaosCallback(), checkpoints, *callbacks],  # chaos: ChaosCallback
                        logger=False, enable_progress_bar=False, enable_model_summary=False,
                        deterministic=True, use_distributed_sampler=not args.stateful_sampler,
                        detect_anomaly=args.detect_anomaly,
                        plugins=[L.pytorch.plugins.io.AsyncCheckpointIO()] if args.async_checkpoint else None)
    startup.resume()
    resume = "last" if args.resume == "last" else newest_whole(ckpt_dir)
    trainer.fit(Regression(model, args.step_sleep), loader, ckpt_path=resume)
    return 0


if __name__ == "__main__":
    sys.exit(main())
