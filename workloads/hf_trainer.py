"""A user's Hugging Face Trainer script, resumed the way the transformers examples do.

A tiny GPT-2 built from a config with random weights, trained on seeded random token sequences
made in memory (no downloads) by ``transformers.Trainer`` under torchrun (DDP over gloo on CPU),
saving ``checkpoint-N`` directories every ``--ckpt-every`` steps with ``save_total_limit``. On
start it resumes from ``get_last_checkpoint(output_dir)``, as run_clm.py and the Trainer docs show.
The two lines that make it a chaos workload are marked ``chaos:``.

    torchrun --standalone --nproc-per-node 2 workloads/hf_trainer.py --steps 40 --ckpt-every 5

``--save-delay-s`` stands in for slow storage: each save waits that long after writing the model
and before the optimizer, RNG and trainer state, so a fault can land inside the Trainer's own save.
``--resume-complete`` resumes from the newest finished save instead (a kill inside a save leaves a
``checkpoint-N`` without its trainer state, which get_last_checkpoint still picks).
``--nonfinite-guard`` adds the remedy a user writes for a NaN (the Trainer has none: it trains on, and its
default ``logging_nan_inf_filter`` hides the bad step from the logs): a callback that stops every rank
before the optimizer applies a non-finite gradient, so torchrun restarts from the last checkpoint.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # userloop, from any cwd
if importlib.util.find_spec("chaos") is None:
    sys.path.insert(1, str(HERE.parent))  # chaos from the source tree

from trainkit import startup  # noqa: E402

startup.pause()  # before torch is imported; resumed once the model is wrapped (trainkit/startup.py)

import argparse  # noqa: E402
import gc  # noqa: E402

import torch  # noqa: E402

from chaos.integrations import require  # noqa: E402

transformers = require("transformers")
from chaos.integrations.hf import ChaosCallback, Indexed, last_complete_checkpoint  # noqa: E402
from userloop import accumulation, add_global_batch, stop_if_not_finite  # noqa: E402


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dataset-size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8, help="per device")
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--keep", type=int, default=2, help="save_total_limit")
    ap.add_argument("--step-sleep", type=float, default=0.05, help="stand-in for a step's real work")
    ap.add_argument("--resume-complete", action="store_true",
                    help="resume from chaos.integrations.hf.last_complete_checkpoint, not get_last_checkpoint")
    ap.add_argument("--save-delay-s", type=float, default=0.0, help="slow storage: hold each save open this long")
    ap.add_argument("--nonfinite-guard", action="store_true",
                    help="stop every rank before the optimizer applies a non-finite gradient (NonFiniteGuard)")
    add_global_batch(ap)
    return ap.parse_args(argv)


class TokenSequences(torch.utils.data.Dataset):
    """Seeded random token sequences, the same on every rank and in every attempt."""

    def __init__(self, size: int, length: int, vocab: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, vocab, (size, length), generator=gen)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.tokens[i], "labels": self.tokens[i]}


class SlowStorageTrainer(transformers.Trainer):
    """The Trainer, with every save held open between the model and the rest (``--save-delay-s``)."""

    save_delay_s = 0.0

    def _save_optimizer_and_scheduler(self, output_dir):
        time.sleep(self.save_delay_s)
        return super()._save_optimizer_and_scheduler(output_dir)


class StepWork(transformers.TrainerCallback):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


class NonFiniteGuard(transformers.TrainerCallback):
    """The user's remedy for a NaN, where the Trainer calls back before the optimizer steps (userloop.stop_if_not_finite)."""

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        stop_if_not_finite(model.parameters(), state.global_step + 1)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    output_dir = os.environ.get("CHAOS_CKPT_DIR", "hf-out")
    transformers.set_seed(args.seed)
    config = transformers.GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    training = transformers.TrainingArguments(
        output_dir=output_dir, max_steps=args.steps, save_steps=args.ckpt_every, save_total_limit=args.keep,
        per_device_train_batch_size=args.batch_size, gradient_accumulation_steps=accumulation(args),
        dataloader_num_workers=args.num_workers,
        learning_rate=1e-3, seed=args.seed, use_cpu=True, ddp_find_unused_parameters=False, report_to="none", logging_steps=10**6,
        disable_tqdm=True)
    SlowStorageTrainer.save_delay_s = args.save_delay_s
    trainer = SlowStorageTrainer(model=model, args=training,
                                 train_dataset=Indexed(TokenSequences(args.dataset_size, 16, 128, args.seed)))  # chaos:
    trainer.add_callback(ChaosCallback())  # chaos:
    trainer.add_callback(StepWork(args.step_sleep))
    if args.nonfinite_guard:
        trainer.add_callback(NonFiniteGuard())
    if args.resume_complete:
        last = last_complete_checkpoint(output_dir)
    else:  # the examples' way
        last = transformers.trainer_utils.get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
    startup.resume()
    trainer.train(resume_from_checkpoint=last)
    shutdown(trainer)
    return 0


def shutdown(trainer) -> None:
    """Tear down DDP before the process group, then the group, while the interpreter is whole.

    Left to interpreter exit, a gloo worker thread still holding a finished collective's tensors
    aborts the process ("terminate called without an active exception", exit -6) after training
    finished, and torchrun restarts a finished job. Destroying the group while DDP's reducer still
    holds it deadlocks instead: the reducer's destructor joins gloo's threads holding the GIL, and a
    thread needs the GIL to release its tensors (pytorch/pytorch#56297). So: drop every reference to
    the DDP model first, then destroy the group (its binding releases the GIL).
    """
    if not torch.distributed.is_initialized():
        return
    torch.distributed.barrier()
    trainer.accelerator.free_memory()
    trainer.model_wrapped = trainer.model = trainer.optimizer = trainer.lr_scheduler = None
    gc.collect()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
