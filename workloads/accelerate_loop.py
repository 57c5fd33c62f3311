"""A user's training loop with Hugging Face Accelerate, resumed the way its docs show.

``accelerator.prepare`` shards a shuffled DataLoader over the ranks; every ``--ckpt-every`` steps
``accelerator.save_state`` writes the model, optimizer, RNG and sampler states (plus the loop's
own step/epoch), and a resume calls ``load_state`` and skips the batches of the interrupted epoch
already trained with ``accelerator.skip_first_batches``. The indices each step consumed are taken
where the batch reaches the loop (chaos.integrations.samples), so ``exactly_once`` judges what the
resume replays or skips.

    torchrun --standalone --nproc-per-node 2 workloads/accelerate_loop.py --steps 40 --ckpt-every 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

if importlib.util.find_spec("chaos") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # chaos from the source tree

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from chaos import sdk  # noqa: E402
from chaos.checkpoint.manifest import build_manifest, fsync_path, verify_manifest, write_manifest  # noqa: E402
from chaos.integrations import require, samples  # noqa: E402

STEP_DIR = "step_{:06d}"
LOOP_STATE = "loop.json"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dataset-size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--keep", type=int, default=2)
    ap.add_argument("--step-sleep", type=float, default=0.05)
    ap.add_argument("--seedable-sampler", action="store_true",
                    help="DataLoaderConfiguration(use_seedable_sampler=True): each epoch's order from seed + epoch")
    return ap.parse_args(argv)


def newest_checkpoint(root: Path) -> Path | None:
    for entry in sorted(root.glob("step_*"), reverse=True):
        problems = verify_manifest(entry) if entry.is_dir() else ["not a directory"]
        if not problems:
            return entry
        sdk.ckpt_reject(str(entry), "; ".join(problems)[:300])
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    accelerate = require("accelerate")
    config = accelerate.DataLoaderConfiguration(use_seedable_sampler=args.seedable_sampler)
    accelerator = accelerate.Accelerator(cpu=True, dataloader_config=config)
    accelerate.utils.set_seed(args.seed)
    rank = accelerator.process_index
    root = Path(os.environ.get("CHAOS_CKPT_DIR", "ckpt"))
    root.mkdir(parents=True, exist_ok=True)

    gen = torch.Generator().manual_seed(args.seed)
    data = TensorDataset(torch.randn(args.dataset_size, 16, generator=gen), torch.randn(args.dataset_size, 1, generator=gen))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(samples.Indexed(data), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers, collate_fn=samples.collate())
    model, opt, loader = accelerator.prepare(model, opt, loader)
    tracker = samples.Tracker()

    step, epoch, in_epoch = 0, 0, 0
    ckpt = newest_checkpoint(root)
    if ckpt is not None:
        accelerator.load_state(str(ckpt))
        loop = json.loads((ckpt / LOOP_STATE).read_text())
        step, epoch, in_epoch = loop["step"], loop["epoch"], loop["in_epoch"]
    sdk.start(dataset_size=args.dataset_size, device="cpu", world_size=accelerator.num_processes)
    sdk.ckpt_load(step, str(ckpt) if ckpt else None)

    while step < args.steps:
        loader.set_epoch(epoch)
        # The documented resume: skip what this epoch already trained.
        batches = accelerator.skip_first_batches(loader, in_epoch) if in_epoch else loader
        for x, y in tracker.track(batches):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            opt.step()
            step += 1
            in_epoch += 1
            time.sleep(args.step_sleep)
            sdk.step(step, epoch=epoch, samples=tracker.take(), loss=float(loss))
            if step % args.ckpt_every == 0 or step == args.steps:
                save(accelerator, root, {"step": step, "epoch": epoch, "in_epoch": in_epoch}, args)
            if step >= args.steps:
                break
        else:
            epoch, in_epoch = epoch + 1, 0
    unwrapped = accelerator.unwrap_model(model)
    sdk.final(step, digest=sdk.digest_state(unwrapped.state_dict(), opt.state_dict()))
    accelerator.end_training()
    return 0


def save(accelerator, root: Path, loop: dict, args: argparse.Namespace) -> None:
    """``save_state`` into a temporary directory, then the main process seals it and renames it into place."""
    step = loop["step"]
    final, tmp = root / STEP_DIR.format(step), root / f".tmp-{STEP_DIR.format(step)}"
    t0 = time.time()
    if accelerator.is_main_process:
        sdk.ckpt_begin(step, str(final))
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / LOOP_STATE).write_text(json.dumps(loop))
        for f in tmp.rglob("*"):
            if f.is_file():
                fsync_path(f)
        write_manifest(tmp, build_manifest(tmp, step, format="accelerate"))
        os.replace(tmp, final)
        fsync_path(root)
        size = sum(f.stat().st_size for f in final.rglob("*") if f.is_file())
        sdk.ckpt_commit(step, str(final), bytes=size, seconds=time.time() - t0)
        for old in sorted(root.glob("step_*"))[:-args.keep]:
            gone = root / f".pruned-{old.name}"
            os.replace(old, gone)
            shutil.rmtree(gone, ignore_errors=True)
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    sys.exit(main())
