"""Inside a rank: the DDP communication hook a ``collective-error`` and a ``bitflip`` of the bucket act through.

DDP all-reduces gradients in C++, out of reach of module and optimizer hooks; its one extension point
is a communication hook, registered once per model. When a run arms a collective-error (or a bitflip of the bucket) the harness
sets ``CHAOS_INSTEP_COMM``, and every ``DistributedDataParallel`` built in the rank registers this
hook as it is constructed. The hook does what DDP does without one (an all-reduce of the bucket,
averaged) until the fault is armed for this rank; a script that registers its own hook later gets it
called in the same place (its registration is kept, not refused), so the fault composes with
PowerSGD, fp16 compression and the rest.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from chaos.instep.command import COMM_ENV

__all__ = ["COMM_ENV", "patch_ddp", "unpatch_ddp"]


def patch_ddp(runtime: Any) -> bool:
    """Make every DDP model built from now on register the chaos hook; False where DDP is absent."""
    if not os.environ.get(COMM_ENV):
        return False
    # Loaded by ``import torch`` before torch.optim (whose import installs the runtime): taken from there,
    # never imported here, in the middle of torch's own import.
    module = sys.modules.get("torch.nn.parallel.distributed")
    DDP = getattr(module, "DistributedDataParallel", None)
    if DDP is None:
        return False
    if getattr(DDP, "_chaos_patched", False):
        return True
    original_init = DDP.__init__
    original_register = DDP.register_comm_hook

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._chaos_user_hook = None
        original_register(self, state=self, hook=_hook(runtime))

    def register_comm_hook(self: Any, state: object, hook: Any) -> None:
        # The script's own hook, called by ours: DDP accepts one hook per model.
        if getattr(self, "_chaos_user_hook", None) is not None:
            raise RuntimeError("register_comm_hook must be called only once")
        self._chaos_user_hook = (state, hook)

    DDP._chaos_original = (original_init, original_register)
    DDP.__init__ = __init__  # type: ignore[method-assign]
    DDP.register_comm_hook = register_comm_hook  # type: ignore[method-assign]
    DDP._chaos_patched = True
    return True


def unpatch_ddp() -> None:
    """Undo ``patch_ddp`` (tests: a rank keeps the patch for life)."""
    module = sys.modules.get("torch.nn.parallel.distributed")
    DDP = getattr(module, "DistributedDataParallel", None)
    if DDP is not None and getattr(DDP, "_chaos_patched", False):
        DDP.__init__, DDP.register_comm_hook = DDP._chaos_original  # type: ignore[method-assign]
        DDP._chaos_patched = False


def _hook(runtime: Any) -> Any:
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    # No annotations: DDP refuses a hook whose parameters are annotated with anything but its own types.
    def chaos_comm_hook(ddp, bucket):  # type: ignore[no-untyped-def]
        # The first bucket only: one application per step, whatever the number of buckets.
        cmd = runtime.comm_fault() if bucket.index() == 0 else None
        if cmd is not None and cmd.where == "allreduce":
            runtime.landed(cmd, bucket=bucket.index())
            if cmd.params.get("mode") == "kill":
                # Counted and evidenced above before the process goes: the attempt that follows does not meet it
                # again. SIGKILL, as a host or a kernel OOM-kill does: no handler, no flush, no goodbye to peers.
                os.kill(os.getpid(), signal.SIGKILL)
            if cmd.params.get("mode") == "hang":
                return torch.futures.Future()  # never completed: this rank waits in backward, its peers in the all-reduce
            fut = torch.futures.Future()
            fut.set_exception(RuntimeError(
                f"chaos: injected failure of the gradient all-reduce (bucket {bucket.index()}) on rank {runtime.rank}"))
            return fut
        user = ddp._chaos_user_hook
        if user is not None:
            state, hook = user
            fut = hook(state, bucket)
        else:
            fut = allreduce_hook(ddp.process_group, bucket)  # the model's own group, as DDP's built-in all-reduce
        if cmd is None:
            return fut

        def corrupt(done):  # type: ignore[no-untyped-def]
            # The reduced bucket as this rank receives it: DDP copies it into the gradients next.
            value = done.value()
            tensor = value[0] if isinstance(value, (list, tuple)) else value
            runtime.flip_bucket(cmd, tensor, bucket.index())
            return value

        return fut.then(corrupt)

    return chaos_comm_hook
