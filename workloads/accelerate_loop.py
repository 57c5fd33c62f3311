"""A user's training loop with Hugging Face Accelerate, resumed the way its docs show.

``accelerator.prepare`` shards a shuffled DataLoader over the ranks; every ``--ckpt-every`` steps
``accelerator.save_state`` writes the model, optimizer, RNG and sampler states (plus the loop's
own step/epoch), and a resume calls ``load_state`` and skips the batches of the interrupted epoch
already trained with ``accelerator.skip_first_batches``. The indices each step consumed are taken
where the batch reaches the loop (chaos.integrations.samples), so ``exactly_once`` judges what the
resume replays or skips.

    torchrun --standalone --nproc-per-node 2 workloads/accelerate_loop.py --steps 40 --ckpt-every 5

``--native-checkpoints`` keeps Accelerate's own checkpoint directories instead (automatic naming with
``total_limit``, the loop's position registered for checkpointing, ``load_state()`` on start), each
save and resume reported by chaos.integrations.accelerate; ``--resume-iteration`` adds the line a
resume needs there (the save counter set past the checkpoints on disk), and ``--resume-complete``
resumes from the newest finished one instead of the newest (a save killed part-way is the newest).
``--save-delay-s`` (with ``--native-checkpoints``) stands in for slow storage: the loop's state,
which Accelerate writes last, takes that long to write.

``--nonfinite-guard`` adds the remedy a user writes for a NaN (Accelerate has none: the optimizer applies
whatever the gradients hold): before the optimizer steps, a non-finite gradient norm (the gradients are
already averaged over the ranks, so every rank sees the same) stops every rank for a restart from the
last checkpoint.

``--global-batch`` keeps the samples per optimizer step whatever the world size, with Accelerate's
gradient accumulation (``gradient_accumulation_steps`` and ``accelerator.accumulate``): a resume at
another world size then skips the same samples the job trained (the loop's position counts steps).
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

from trainkit import startup  # noqa: E402

startup.pause()  # before torch is imported; resumed once the model is wrapped (trainkit/startup.py)

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from chaos import sdk  # noqa: E402
from chaos.integrations import require, samples  # noqa: E402
from userloop import (  # noqa: E402
    accumulation, add_global_batch, arguments, begin, ckpt_root, newest_checkpoint, seal, staging, stop_if_not_finite,
    toy_problem)

LOOP_STATE = "loop.json"


def parse(argv: list[str] | None):
    ap = arguments(__doc__.splitlines()[0], num_workers=0)
    ap.add_argument("--seedable-sampler", action="store_true",
                    help="DataLoaderConfiguration(use_seedable_sampler=True): each epoch's order from seed + epoch")
    ap.add_argument("--native-checkpoints", action="store_true",
                    help="Accelerate's own checkpoint_N directories (ProjectConfiguration automatic_checkpoint_naming, "
                         "total_limit=--keep, the loop's state registered for checkpointing), resumed with load_state()")
    ap.add_argument("--resume-iteration", action="store_true",
                    help="with --native-checkpoints: after load_state, set the save iteration past the checkpoints on disk")
    ap.add_argument("--resume-complete", action="store_true",
                    help="with --native-checkpoints: resume from the newest finished checkpoint_N "
                         "(chaos.integrations.accelerate.last_complete_checkpoint), not load_state()'s pick")
    ap.add_argument("--nonfinite-guard", action="store_true",
                    help="stop every rank before the optimizer applies a non-finite gradient")
    add_global_batch(ap)  # with Accelerator(gradient_accumulation_steps=...) and accelerator.accumulate
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.global_batch and args.native_checkpoints:
        raise SystemExit("--global-batch is built into the loop with its own checkpoints: drop --native-checkpoints")
    accelerate = require("accelerate")
    config = accelerate.DataLoaderConfiguration(use_seedable_sampler=args.seedable_sampler)
    root = ckpt_root()
    project = accelerate.utils.ProjectConfiguration(project_dir=str(root), automatic_checkpoint_naming=True,
                                                    total_limit=args.keep) if args.native_checkpoints else None
    micro = accumulation(args)  # micro-batches per optimizer step (1 without --global-batch)
    accelerator = accelerate.Accelerator(cpu=True, dataloader_config=config, project_config=project,
                                         gradient_accumulation_steps=micro)
    accelerate.utils.set_seed(args.seed)
    data, model, opt = toy_problem(args)
    loader = DataLoader(samples.Indexed(data), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers, collate_fn=samples.collate())
    model, opt, loader = accelerator.prepare(model, opt, loader)
    startup.resume()
    tracker = samples.Tracker()

    if args.native_checkpoints:
        return native(args, accelerator, model, opt, loader, tracker)
    step, epoch, in_epoch = 0, 0, 0
    ckpt = newest_checkpoint(root)
    if ckpt is not None:
        accelerator.load_state(str(ckpt))
        loop = json.loads((ckpt / LOOP_STATE).read_text())
        step, epoch, in_epoch = loop["step"], loop["epoch"], loop["in_epoch"]
        # load_state restores Accelerate's micro-batch counter as the saving world size counted it; accumulate()
        # steps the optimizer when it reaches a multiple of this run's micro-batches per step.
        accelerator.step = in_epoch * micro
    sdk.start(dataset_size=args.dataset_size, device="cpu", world_size=accelerator.num_processes)
    sdk.ckpt_load(step, str(ckpt) if ckpt else None)

    while step < args.steps:
        loader.set_epoch(epoch)
        # The documented resume: skip what this epoch already trained (in this run's batches: `micro` per step).
        batches = accelerator.skip_first_batches(loader, in_epoch * micro) if in_epoch else loader
        losses = []
        for x, y in tracker.track(batches):
            with accelerator.accumulate(model):  # steps the optimizer every `micro` batches, and syncs then
                loss = torch.nn.functional.mse_loss(model(x), y)
                accelerator.backward(loss)
                if args.nonfinite_guard and accelerator.sync_gradients:
                    stop_if_not_finite(model.parameters(), step + 1)
                opt.step()
                opt.zero_grad()
            losses.append(float(loss))
            if not accelerator.sync_gradients:
                continue
            step += 1
            in_epoch += 1
            time.sleep(args.step_sleep)
            sdk.step(step, epoch=epoch, samples=tracker.take(), loss=sum(losses) / len(losses))
            losses = []
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


class LoopState:
    """The loop's own position, saved by Accelerate with everything else (register_for_checkpointing)."""

    def __init__(self, save_delay_s: float = 0.0) -> None:
        self.step, self.epoch, self.in_epoch = 0, 0, 0
        self.save_delay_s = save_delay_s

    def state_dict(self) -> dict:
        # Accelerate calls this while saving, after the model, optimizer and RNG files: the slow write stands here.
        time.sleep(self.save_delay_s)
        return {"step": self.step, "epoch": self.epoch, "in_epoch": self.in_epoch}

    def load_state_dict(self, state: dict) -> None:
        self.step, self.epoch, self.in_epoch = state["step"], state["epoch"], state["in_epoch"]


def native(args, accelerator, model, opt, loader, tracker) -> int:
    """The loop with Accelerate's own checkpoint directories, as its docs show them: automatic_checkpoint_naming
    with total_limit, the loop's position registered for checkpointing, load_state() picking the newest."""
    from chaos.integrations import accelerate as chaos_accelerate

    loop = LoopState(args.save_delay_s)
    accelerator.register_for_checkpointing(loop)
    if args.resume_complete:
        path = chaos_accelerate.last_complete_checkpoint(accelerator)
        if path is not None:
            chaos_accelerate.load_state(accelerator, path)
    else:  # as Accelerate's docs show: load_state() picks the highest checkpoint_N
        path = chaos_accelerate.load_state(accelerator) if chaos_accelerate.has_checkpoint(accelerator) else None
    if path is not None and (args.resume_iteration or args.resume_complete):
        # load_state does not restore the save counter: without this, the next save is checkpoint_0 again.
        accelerator.project_configuration.iteration = chaos_accelerate.next_iteration(accelerator)
    sdk.start(dataset_size=args.dataset_size, device="cpu", world_size=accelerator.num_processes)
    sdk.ckpt_load(loop.step, path)
    while loop.step < args.steps:
        loader.set_epoch(loop.epoch)
        batches = accelerator.skip_first_batches(loader, loop.in_epoch) if loop.in_epoch else loader
        for x, y in tracker.track(batches):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            opt.step()
            loop.step += 1
            loop.in_epoch += 1
            time.sleep(args.step_sleep)
            sdk.step(loop.step, epoch=loop.epoch, samples=tracker.take(), loss=float(loss))
            if loop.step % args.ckpt_every == 0 or loop.step == args.steps:
                chaos_accelerate.save_state(accelerator, step=loop.step)
            if loop.step >= args.steps:
                break
        else:
            loop.epoch, loop.in_epoch = loop.epoch + 1, 0
    sdk.final(loop.step, digest=sdk.digest_state(accelerator.unwrap_model(model).state_dict(), opt.state_dict()))
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
