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

import importlib.util
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # userloop, from any cwd
if importlib.util.find_spec("chaos") is None:
    sys.path.insert(1, str(HERE.parent))  # chaos from the source tree

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from chaos import sdk  # noqa: E402
from chaos.integrations import require, samples  # noqa: E402
from userloop import arguments, begin, ckpt_root, newest_checkpoint, seal, staging, toy_problem  # noqa: E402

LOOP_STATE = "loop.json"


def parse(argv: list[str] | None):
    ap = arguments(__doc__.splitlines()[0], num_workers=0)
    ap.add_argument("--seedable-sampler", action="store_true",
                    help="DataLoaderConfiguration(use_seedable_sampler=True): each epoch's order from seed + epoch")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    accelerate = require("accelerate")
    config = accelerate.DataLoaderConfiguration(use_seedable_sampler=args.seedable_sampler)
    accelerator = accelerate.Accelerator(cpu=True, dataloader_config=config)
    accelerate.utils.set_seed(args.seed)
    rank = accelerator.process_index
    root = ckpt_root()
    data, model, opt = toy_problem(args)
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


def save(accelerator, root: Path, loop: dict, args) -> None:
    """``save_state`` into a temporary directory, then the main process seals it (userloop.seal)."""
    step = loop["step"]
    _final, tmp = staging(root, step)
    if accelerator.is_main_process:
        t0 = begin(root, step)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / LOOP_STATE).write_text(json.dumps(loop))
        seal(root, step, "accelerate", args.keep, t0)
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    sys.exit(main())
