"""``ChaosCallback``: a Lightning ``Trainer`` that speaks the event protocol.

Two lines in a user's script::

    from chaos.integrations.lightning import ChaosCallback, Indexed
    loader = DataLoader(Indexed(dataset), ...)            # dict examples gain a chaos_index field
    trainer = L.Trainer(..., callbacks=[ChaosCallback(), ModelCheckpoint(...)])

What it reports, and from where:

* ``start`` and ``ckpt_load`` at ``on_train_start``: by then Lightning has restored the loops from
  ``fit(ckpt_path=...)``; the path is ``trainer.ckpt_path`` (what ``"last"`` resolved to; the file a
  ``last.ckpt`` link points to), the step
  ``trainer.global_step`` (0 and no path: a fresh start);
* ``step`` when ``trainer.global_step`` advanced at ``on_train_batch_end`` (an optimizer step; with
  ``accumulate_grad_batches`` several batches make one), with the indices of every batch since the
  last one and the mean of their ``training_step`` losses. ``on_train_batch_start`` receives the
  batch the training step is about to get, after the loader's workers and the transfer to the
  device, and takes ``chaos_index`` out of it
  (a dict batch is the same object the training step then sees); batches without it leave the
  steps without samples, and ``exactly_once`` says it cannot judge;
* ``ckpt_begin`` / ``ckpt_commit`` around the strategy's ``CheckpointIO.save_checkpoint`` (every
  save Lightning writes, ModelCheckpoint's included, on the process that writes it), with the
  file's path and size; under ``AsyncCheckpointIO``, around the write in its thread, with
  ``ckpt_staged`` when the training loop gets control back (its copy of the tensors made);
* ``final`` at ``on_train_end``: the step and a digest of the module's and optimizers' state.
"""

from __future__ import annotations

import os
import time
from typing import Any

from chaos import sdk
from chaos.integrations import dataset_size, require, saved_bytes
from chaos.integrations.samples import INDEX_KEY
from chaos.integrations.samples import IndexedDict as Indexed

__all__ = ["ChaosCallback", "Indexed", "INDEX_KEY"]

_lightning = require("lightning")


class ChaosCallback(_lightning.pytorch.Callback):
    """Reports the Trainer's start, resume, steps (with samples), checkpoint saves and final state as chaos events."""

    def __init__(self) -> None:
        self._pending: list[int] = []
        self._losses: list[float] = []
        self._last_step = 0
        self._wrapped: Any = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":
            self._wrap_checkpoint_io(trainer)

    def on_train_start(self, trainer, pl_module) -> None:
        loader = trainer.train_dataloader
        sdk.start(dataset_size=dataset_size(loader), device=str(pl_module.device), world_size=trainer.world_size,
                  stack=f"lightning {_lightning.__version__}")
        self._last_step = int(trainer.global_step)
        path = trainer.ckpt_path
        if path and "://" not in str(path):
            # The file itself: last.ckpt may be a link (ModelCheckpoint(save_last="link")) that later saves move on.
            path = os.path.realpath(path)
        sdk.ckpt_load(self._last_step, str(path) if path and self._last_step else None)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if isinstance(batch, dict) and INDEX_KEY in batch:
            self._pending.extend(int(i) for i in batch.pop(INDEX_KEY).reshape(-1).tolist())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None and hasattr(loss, "detach"):
            # Lightning hands callbacks the loss it backpropagates: training_step's divided by accumulate_grad_batches
            # (automatic optimization only; manual optimization cannot accumulate). The report is what the model scored.
            scale = trainer.accumulate_grad_batches if pl_module.automatic_optimization else 1
            self._losses.append(float(loss.detach()) * scale)
        step = int(trainer.global_step)
        if step == self._last_step:  # accumulating: no optimizer step yet
            return
        taken, self._pending = self._pending, []
        losses, self._losses = self._losses, []
        sdk.step(step, epoch=int(trainer.current_epoch), samples=taken,
                 loss=sum(losses) / len(losses) if losses else float("nan"))
        self._last_step = step

    def on_train_end(self, trainer, pl_module) -> None:
        states = [pl_module.state_dict()] + [opt.state_dict() for opt in trainer.optimizers]
        sdk.final(int(trainer.global_step), digest=sdk.digest_state(*states))

    def teardown(self, trainer, pl_module, stage: str) -> None:
        for io, original in reversed(self._wrapped or []):
            io.save_checkpoint = original
        self._wrapped = None

    def _wrap_checkpoint_io(self, trainer) -> None:
        """Report each save around the write itself: Lightning's callbacks hear of a save before the file exists.

        The write is the innermost CheckpointIO's: a wrapper such as AsyncCheckpointIO only hands the checkpoint to
        a thread, and a commit reported when that returns would name a file not written yet. Under AsyncCheckpointIO
        the caller's part (its copy of every tensor) is reported as the save's staging, ``ckpt_staged``."""
        if self._wrapped is not None:
            return
        outer = trainer.strategy.checkpoint_io  # the property also gives a wrapper its base CheckpointIO
        io, wrappers = outer, []
        while getattr(io, "checkpoint_io", None) is not None:
            wrappers.append(io)
            io = io.checkpoint_io
        self._wrapped = [(io, io.save_checkpoint)]
        original = io.save_checkpoint

        def save_checkpoint(checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
            step = int(checkpoint.get("global_step", trainer.global_step))
            t0 = time.time()
            sdk.ckpt_begin(step, str(path))
            try:
                original(checkpoint, path, storage_options=storage_options)
            except BaseException as exc:
                sdk.ckpt_error(step, str(path), f"{type(exc).__name__}: {exc}")
                raise
            sdk.ckpt_commit(step, str(path), bytes=saved_bytes(path), seconds=time.time() - t0)

        io.save_checkpoint = save_checkpoint
        if any(type(w).__name__ == "AsyncCheckpointIO" for w in wrappers):
            submit = outer.save_checkpoint

            def staged(checkpoint: dict[str, Any], *args: Any, **kwargs: Any) -> None:
                t0 = time.monotonic()
                submit(checkpoint, *args, **kwargs)
                sdk.ckpt_staged(int(checkpoint.get("global_step", trainer.global_step)), seconds=time.monotonic() - t0)

            self._wrapped.append((outer, submit))
            outer.save_checkpoint = staged
