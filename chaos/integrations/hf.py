"""``ChaosCallback``: a Hugging Face ``transformers.Trainer`` that speaks the event protocol.

Two lines in a user's script::

    from chaos.integrations.hf import ChaosCallback, Indexed
    trainer = Trainer(model=model, args=args, train_dataset=Indexed(train_dataset))
    trainer.add_callback(ChaosCallback())

What it reports, and from where (each figure the checks judge rests on what the Trainer really did):

* ``start`` and ``ckpt_load`` at ``on_train_begin``: the Trainer has by then restored
  ``state.global_step`` from the checkpoint it resumed (a fresh start is step 0). The Trainer does
  not hand its callbacks the path it resumed from; it is the ``checkpoint-N`` directory of that
  step in ``output_dir`` (the only name the Trainer saves under), reported without a path when no
  such directory exists (a ``resume_from_checkpoint`` outside ``output_dir``);
* ``step`` at ``on_step_end``, with the dataset indices of every micro-batch the model was given
  since the last optimizer step. ``Indexed`` adds a ``chaos_index`` field to each example; the
  Trainer's collator batches it through the loader workers, prefetching and ``skip_first_batches``
  like any other field, and a forward pre-hook takes it off the model's inputs where the batch
  reaches the model (an evaluation forward's indices are dropped). Without ``Indexed``, steps carry
  no samples and ``exactly_once`` says it cannot judge;
* ``ckpt_begin`` at ``on_step_end`` when the Trainer decided to save this step (its flow callback
  runs before any added one), ``ckpt_commit`` at ``on_save`` (after ``_save_checkpoint`` wrote the
  model, optimizer, scheduler, RNG and ``trainer_state.json``), on the main process only;
* ``final`` at ``on_train_end``: the step and a digest of the model and optimizer state.

``last_complete_checkpoint(output_dir)`` replaces ``get_last_checkpoint`` where a kill can land
inside a save (see its docstring).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from chaos import sdk
from chaos.integrations import dataset_size, require, saved_bytes
from chaos.integrations.samples import INDEX_KEY
from chaos.integrations.samples import IndexedDict as Indexed

__all__ = ["ChaosCallback", "Indexed", "INDEX_KEY", "last_complete_checkpoint"]

CHECKPOINT_DIR = "checkpoint-{}"
"""How the Trainer names a save (transformers.trainer_utils.PREFIX_CHECKPOINT_DIR + global step)."""

_transformers = require("transformers")


class ChaosCallback(_transformers.TrainerCallback):
    """Reports the Trainer's start, resume, steps (with samples), saves and final state as chaos events."""

    def __init__(self) -> None:
        self._pending: list[int] = []
        self._losses: list[float] = []
        self._hooks: list[Any] = []
        self._epoch = 0
        self._save_t0: float | None = None

    # ------------------------------------------------------------------ the Trainer's events

    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        self._attach(model)
        _let_index_through(train_dataloader)
        sdk.start(dataset_size=dataset_size(train_dataloader), device=str(args.device),
                  world_size=args.world_size, stack=f"transformers {_transformers.__version__}")
        step = int(state.global_step)
        path = Path(args.output_dir) / CHECKPOINT_DIR.format(step) if step else None
        sdk.ckpt_load(step, str(path) if path is not None and path.is_dir() else None)

    def on_epoch_begin(self, args, state, control, **kwargs):
        # state.epoch is the epoch's index at its start, and epoch + fraction done after a resume into it.
        self._epoch = int(math.floor(state.epoch or 0.0))

    def on_step_end(self, args, state, control, **kwargs):
        taken, self._pending = self._pending, []
        losses, self._losses = self._losses, []
        loss = sum(losses) / len(losses) if losses else float("nan")
        sdk.step(int(state.global_step), epoch=self._epoch, samples=taken, loss=loss)
        # DefaultFlowCallback, always first in the handler, has already decided whether this step saves.
        if control.should_save and state.is_world_process_zero:
            self._save_t0 = time.time()
            sdk.ckpt_begin(int(state.global_step), str(_checkpoint_path(args, state)))

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        path = _checkpoint_path(args, state)
        t0 = self._save_t0 if self._save_t0 is not None else time.time()
        sdk.ckpt_commit(int(state.global_step), str(path), bytes=saved_bytes(path), seconds=time.time() - t0)
        self._save_t0 = None

    def on_train_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        states = [model.state_dict()] if model is not None else []
        if optimizer is not None:
            states.append(optimizer.state_dict())
        sdk.final(int(state.global_step), digest=sdk.digest_state(*states))
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    # ------------------------------------------------------------------ the model's inputs

    def _attach(self, model: Any) -> None:
        if model is None or self._hooks:
            return
        self._hooks = [model.register_forward_pre_hook(self._take_index, with_kwargs=True),
                       model.register_forward_hook(self._take_loss)]

    def _take_index(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        if INDEX_KEY not in kwargs:
            return None
        kwargs = dict(kwargs)
        indices = kwargs.pop(INDEX_KEY)
        if module.training:  # an evaluation batch is not training data
            self._pending.extend(int(i) for i in indices.reshape(-1).tolist())
        return args, kwargs

    def _take_loss(self, module: Any, args: tuple, output: Any) -> None:
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if module.training and loss is not None:
            self._losses.append(float(loss.detach()))


def last_complete_checkpoint(output_dir: str | os.PathLike[str]) -> str | None:
    """The newest ``checkpoint-N`` in ``output_dir`` that is a finished, intact save, or None.

    A drop-in for ``transformers.trainer_utils.get_last_checkpoint``, which takes the highest
    ``checkpoint-N`` directory even when a kill during the save left it without its trainer state
    (huggingface/transformers#35525): every newer directory passed over is reported (``ckpt_reject``)
    with what is wrong with it. Judged by ``chaos.checkpoint.verify`` without loading the tensors.
    """
    from chaos.checkpoint.verify import UnusableInput, step_of, verify

    root = Path(output_dir)
    if not root.is_dir():
        return None
    entries = sorted((e for e in root.iterdir() if e.is_dir() and e.name.startswith("checkpoint-")
                      and step_of(e) is not None), key=lambda e: step_of(e) or 0, reverse=True)
    for entry in entries:
        try:
            report = verify(entry, load=False)
        except UnusableInput as exc:
            sdk.ckpt_reject(str(entry), str(exc)[:300])
            continue
        if report.ok:
            return str(entry)
        sdk.ckpt_reject(str(entry), report.summary()[:300])
    return None


def _checkpoint_path(args: Any, state: Any) -> Path:
    return Path(args.output_dir) / CHECKPOINT_DIR.format(int(state.global_step))


def _let_index_through(loader: Any) -> None:
    """The Trainer wraps its collator to drop every field the model's forward does not take
    (``remove_unused_columns``, on by default): add ``chaos_index`` to the fields it keeps. The
    loader's workers are started per epoch, after ``on_train_begin``, so they get the change."""
    seen = set()
    collate = getattr(loader, "collate_fn", None)
    while collate is not None and id(collate) not in seen:
        seen.add(id(collate))
        columns = getattr(collate, "signature_columns", None)
        if isinstance(columns, list) and INDEX_KEY not in columns:
            columns.append(INDEX_KEY)
        collate = getattr(collate, "data_collator", None)
