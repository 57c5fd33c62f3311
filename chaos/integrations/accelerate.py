"""Helpers for a user's Hugging Face Accelerate loop: its own ``save_state``/``load_state`` directories, reported.

    from chaos import sdk
    from chaos.integrations import accelerate as chaos_accelerate
    path = chaos_accelerate.load_state(accelerator) if chaos_accelerate.has_checkpoint(accelerator) else None
    sdk.ckpt_load(loop.step, path)                       # the step your registered loop state restored
    ...
    chaos_accelerate.save_state(accelerator, step=step)  # instead of accelerator.save_state()

``save_state`` reports ``ckpt_begin`` before Accelerate writes anything and ``ckpt_commit`` once
every process has written its part (a barrier after ``accelerator.save_state``), on the main
process, with the directory Accelerate chose (``checkpoint_N`` under ``automatic_checkpoint_naming``).
``load_state`` loads what Accelerate itself would (the highest ``checkpoint_N`` when no directory is
given) and returns that path, so the load can be reported with the step the loop's state restored.
Samples per step come from ``chaos.integrations.samples`` as in any loop of your own.

A save killed part-way leaves the highest ``checkpoint_N`` unfinished, and ``load_state()`` picks it
anyway. ``last_complete_checkpoint`` is the resume that survives that, and ``next_iteration`` the
save counter that does not collide with what is on disk (``load_state`` does not restore it)::

    path = chaos_accelerate.last_complete_checkpoint(accelerator)
    if path is not None:
        chaos_accelerate.load_state(accelerator, path)
    accelerator.project_configuration.iteration = chaos_accelerate.next_iteration(accelerator)
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from chaos import sdk
from chaos.integrations import require, saved_bytes

_accelerate = require("accelerate")


def _checkpoints_dir(accelerator: Any) -> Path:
    return Path(accelerator.project_dir or ".") / "checkpoints"


def _number(path: Path) -> int:
    # Accelerate's own sort key: the last number in the folder's name.
    found = re.findall(r"([0-9]+)(?=[^/]*$)", path.name)
    return int(found[0]) if found else -1


def _folders(accelerator: Any) -> list[Path]:
    directory = _checkpoints_dir(accelerator)
    return sorted((p for p in directory.iterdir() if p.is_dir()), key=_number) if directory.is_dir() else []


def has_checkpoint(accelerator: Any) -> bool:
    """Is there anything for ``load_state()`` to pick under automatic checkpoint naming?"""
    directory = _checkpoints_dir(accelerator)
    return directory.is_dir() and any(directory.iterdir())


def _automatic(accelerator: Any) -> bool:
    return bool(accelerator.project_configuration.automatic_checkpoint_naming)


def save_state(accelerator: Any, output_dir: str | None = None, *, step: int, **kwargs: Any) -> str:
    """``accelerator.save_state``, with the save reported (see the module's docstring). Returns its directory."""
    expected = output_dir if output_dir is not None else (
        str(_checkpoints_dir(accelerator) / f"checkpoint_{accelerator.save_iteration}") if _automatic(accelerator)
        else None)
    t0 = time.time()
    if accelerator.is_main_process and expected is not None:
        sdk.ckpt_begin(step, expected)
    location = accelerator.save_state(output_dir, **kwargs)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        sdk.ckpt_commit(step, str(location), bytes=saved_bytes(location), seconds=time.time() - t0)
    return str(location)


def load_state(accelerator: Any, input_dir: str | None = None, **kwargs: Any) -> str:
    """``accelerator.load_state``; returns the directory it loaded (Accelerate's pick when ``input_dir`` is None)."""
    if input_dir is None:
        if not _automatic(accelerator):
            raise ValueError("load_state without a directory needs automatic_checkpoint_naming (as Accelerate's does)")
        folders = sorted(_checkpoints_dir(accelerator).iterdir(), key=_number)
        if not folders:
            raise FileNotFoundError(f"no checkpoint under {_checkpoints_dir(accelerator)}")
        input_dir = str(folders[-1])
    accelerator.load_state(input_dir, **kwargs)
    return os.fspath(input_dir)


def unfinished_parts(accelerator: Any, path: str | os.PathLike[str]) -> list[str]:
    """The files a finished ``save_state`` by this accelerator writes that ``path`` lacks.

    Only the running job knows them: every process writes its ``random_states_<i>.pkl``, and the
    objects registered with ``register_for_checkpointing`` are written *after* those, as
    ``custom_checkpoint_<i>.pkl``, so a save killed among them looks finished from the files alone."""
    directory = Path(path)
    wanted = [f"random_states_{i}.pkl" for i in range(accelerator.num_processes)]
    wanted += [f"custom_checkpoint_{i}.pkl" for i in range(len(accelerator._custom_objects))]
    return [name for name in wanted if not (directory / name).is_file()]


def last_complete_checkpoint(accelerator: Any) -> str | None:
    """The newest ``checkpoint_N`` that is a finished, intact save of this accelerator's state, or None.

    In place of ``load_state()``'s own pick (the highest ``checkpoint_N``, finished or not): each
    newer directory passed over is reported (``ckpt_reject``) with what is wrong with it. Judged by
    ``unfinished_parts`` and ``chaos.checkpoint.verify`` without loading the tensors."""
    from chaos.checkpoint.verify import UnusableInput, verify

    for folder in reversed(_folders(accelerator)):
        missing = unfinished_parts(accelerator, folder)
        if missing:
            if accelerator.is_main_process:
                sdk.ckpt_reject(str(folder), f"an unfinished save: {', '.join(missing)} missing")
            continue
        try:
            report = verify(folder, load=False)
        except UnusableInput as exc:
            problem = str(exc)
        else:
            if report.ok:
                return str(folder)
            problem = report.summary()
        if accelerator.is_main_process:
            sdk.ckpt_reject(str(folder), problem[:300])
    return None


def next_iteration(accelerator: Any) -> int:
    """The save counter past every ``checkpoint_N`` on disk (``save_state`` refuses a directory that exists)."""
    folders = _folders(accelerator)
    return _number(folders[-1]) + 1 if folders else 0
