"""``on_file``: fire when something matching a glob appears in the run's checkpoint directory.

Many stacks report nothing about their saves (no ``ckpt_begin``, no ``ckpt_staged``), yet every save
leaves its phases on disk: the HF Trainer's ``tmp-checkpoint-N`` while it writes, a DCP ``.metadata``
when it is done, Lightning's ``epoch=0-step=10.ckpt``, a ``latest`` that moved. This trigger watches the
checkpoint directory from the harness and fires on the ``nth`` distinct path that matches ``on_file``
(a glob relative to the checkpoint directory; ``**`` crosses folders), e.g. ``{on_file: "tmp-checkpoint-*"}``
to strike while the Trainer's save is being written. The directory is listed at every poll of the run
(50 ms): something that appears and is gone again between two polls is not seen.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import Field, field_validator

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class OnFileParams(TriggerParams):
    on_file: str = Field(min_length=1, max_length=500)
    """Glob of the file or folder to wait for, relative to the checkpoint directory (``**`` crosses folders)."""
    nth: int = Field(default=1, ge=1)
    """Fire on the n-th distinct path that matched (``step_*`` with nth 2: the second save's folder)."""

    @field_validator("on_file")
    @classmethod
    def _inside(cls, value: str) -> str:
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"on_file must be a glob inside the checkpoint directory, not {value!r}")
        return value


class OnFile(Trigger, kind="on_file"):
    """Fire when something matching a glob appears in the run's checkpoint directory."""

    Params = OnFileParams
    shorthand = "on_file"

    def __init__(self, params: OnFileParams) -> None:
        super().__init__(params)
        self._seen: set[str] = set()
        self._fired = False

    def __call__(self, state: TriggerState) -> bool:
        if self._fired or state.ckpt_dir is None:
            return False
        try:
            self._seen.update(str(p) for p in state.ckpt_dir.glob(self.params.on_file))
        except OSError:  # the directory mid-change (a rename, a prune): the next poll looks again
            return False
        if len(self._seen) >= self.params.nth:
            self._fired = True
            return True
        return False
