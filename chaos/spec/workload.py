"""The workload section: what to train and how torchrun launches it, and what a fault-free run of it depends on
(the script, the files beside it, the stack's package versions, thread and device settings): the identity
the golden cache is keyed by."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import AliasChoices, Field, model_validator

from chaos.spec.configs import StrictConfig

Scalar = Union[str, int, float, bool]


class WorkloadConfig(StrictConfig):
    """What to train, and how torchrun launches it."""

    script: str | None = None
    """A training script the harness launches under torchrun (path relative to the experiment file, or its parent directories)."""
    command: list[str] | None = None
    """Your own launch command instead of ``script`` (e.g. ["torchrun", ..., "train.py"]). {run_dir}, {ckpt_dir}, {port}, {nproc_per_node}, {nnodes}, {node_rank}, {master_addr} are substituted."""
    python: str | None = None
    """The Python interpreter that runs the launcher and the ranks: the job's own virtual environment (its
    ``bin/python``; absolute, or relative to the experiment file's folder or a folder above it), e.g. a stack pinned
    at another version than the harness's. Default: the harness's own. Only targets that start the workload on this
    host (local, netns, slurm, torchft); in an image it is the target's ``python``. The stack's versions in the
    golden cache key are the ones this interpreter imports."""
    launcher: Literal["torchrun", "ft_launcher"] = "torchrun"
    """What starts each node's workers and restarts them: ``torchrun`` (torch elastic), or ``ft_launcher``, NVIDIA
    Resiliency Extension's torchrun with a monitor beside each rank that kills and restarts the worker group when the
    rank's heartbeats stop (its hang detection; the [nvrx] extra; the script sends heartbeats, e.g. the reference
    workloads' ``nvrx_heartbeats``). Both take the same flags; ignored with ``command``."""
    launcher_args: dict[str, Scalar] = Field(default_factory=dict)
    """The launcher's own flags beyond those the harness sets, as --key value (underscores become dashes), e.g.
    ``{ft_rank_heartbeat_timeout: 5, ft_initial_rank_heartbeat_timeout: 60}`` for ft_launcher."""
    nproc_per_node: int = Field(default=2, ge=1, le=256)
    """Worker processes per node."""
    max_restarts: int = Field(default=3, ge=0, le=1000)
    """torchrun --max-restarts: how many times the agent restarts the workers after a failure."""
    args: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    """Script arguments, passed as --key value (underscores become dashes); true flags pass as --key."""
    golden_omits: list[str] = Field(default_factory=list, validation_alias=AliasChoices("golden_omits", "resume_args"))
    """Keys of ``args`` that never change what a run without faults computes: how a resume happens (which
    checkpoint it picks, how the loader is restored) and when or how fast things happen (sleeps, save delays,
    collective timeouts, the checkpoint interval). The fault-free golden run leaves them out (the script's default
    applies), so experiments that differ only in them share one golden run. One that does change fault-free
    training can only make matches_golden fail, never pass. (``resume_args``, its first name, still reads.)"""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the workload."""
    ckpt_dir: str | None = None
    """Checkpoint directory; default <run_dir>/ckpt. Exposed to the workload as CHAOS_CKPT_DIR. {run_dir} is
    substituted: a script that saves where it runs is judged with ``cwd`` and ``ckpt_dir`` both "{run_dir}/work"."""
    cwd: str | None = None
    """The workload's working directory (default: the harness's). {run_dir} is substituted and the directory is
    made: "{run_dir}/work" gives each run its own, so a script that saves ``snapshot.pt`` where it runs never
    resumes the previous run's snapshot (which would start it past the fault's step, or finish it at once)."""
    join_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    """A spawned attempt whose ranks have not all sent ``start`` (or a ``step``) within this long is named as stuck in
    rendezvous/init, and the run ends there. It applies once the workload is seen to speak the protocol: from the
    first attempt when its ranks import ``chaos.sdk`` (which says ``hello``); raise it above the script's start-up."""
    stall_s: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)
    """End the run, named stalled, when no rank has reported anything (a step, a save, a start) for this long
    while the job still runs: a hang that no collective timeout reaches (a DataLoader worker, blocked storage)
    would otherwise wait out ``timeout_s``. Off by default. Set it above the longest silence the run may have
    on purpose: a fault's duration, the collective timeout plus a restart, the slowest save."""
    share_rdzv_store: bool = False
    """Let torchrun hand its one rendezvous store to every restart attempt (torchrun's default). A script that does not prefix its keys per attempt then hits the gloo restart trap (docs/torchrun-restart-trap.md), so by default the harness sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: every attempt gets a fresh store. Multi-node targets always do (each node counts restarts on its own)."""
    step_regex: str | None = None
    """For workloads that do not speak the event protocol: a regex with a group 'step' matched on their output."""

    @model_validator(mode="after")
    def _golden_omits_are_args(self) -> "WorkloadConfig":
        unknown = [k for k in self.golden_omits if k not in self.args]
        if unknown:
            raise ValueError(f"golden_omits names {', '.join(unknown)}, not in args ({', '.join(self.args) or 'none'})")
        return self

    def golden_args(self) -> dict[str, Any]:
        """The args of the fault-free reference run: all but ``golden_omits``."""
        return {k: v for k, v in self.args.items() if k not in self.golden_omits}

    @model_validator(mode="after")
    def _one_of_script_command(self) -> "WorkloadConfig":
        if (self.script is None) == (self.command is None):
            raise ValueError("give exactly one of 'script' (a training script) or 'command' (your own launch command)")
        return self


SOURCE_SUFFIXES = (".py", ".sh", ".yaml", ".yml", ".json", ".toml", ".cfg", ".ini")
"""Files beside a script (or named by a command) that are part of what it computes: code and its config."""
STACK_PACKAGES = ("torch", "numpy", "transformers", "accelerate", "lightning", "pytorch-lightning", "torchdata",
                  "datasets", "safetensors")
"""Installed versions in the golden cache key: each changes what a fault-free run of the same script computes."""
DEVICE_ENV = ("CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE",
              "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUDA_LAUNCH_BLOCKING")
"""The device environment the ranks inherit that changes their numerics."""
MAX_BESIDE_BYTES = 1 << 20
"""A file beside the script larger than this is data, not config: not read into the key."""


def _arg_paths(arg: str) -> list[Path]:
    """The paths a command-line argument may name: itself, and the value of ``--flag=path``."""
    out = [Path(arg)]
    if arg.startswith("-") and "=" in arg:
        out.append(Path(arg.split("=", 1)[1]))
    return out


def _beside(script: Path) -> list[Path]:
    """The code beside the script and below it (its modules), and the config files in its own folder
    (not below it: a run directory there holds JSON the runs write), none hidden, none data-sized."""
    found = []
    candidates = set(script.parent.rglob("*.py")) | {p for p in script.parent.iterdir() if p.suffix in SOURCE_SUFFIXES}
    for path in sorted(candidates):
        rel = path.relative_to(script.parent).parts
        if path == script or any(p.startswith(".") or p == "__pycache__" for p in rel):
            continue
        try:
            if path.is_file() and path.stat().st_size <= MAX_BESIDE_BYTES:
                found.append(path)
        except OSError:
            continue
    return found


THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables that set torch's intra-op thread count on CPU."""


def installed_version(dist: str) -> str | None:
    """The installed distribution's version from its metadata (``torch.__version__`` for torch's wheels),
    without importing it: importing torch costs the harness ~1.2 CPU-s, taken from the ranks it runs
    beside, and the golden cache key needs only the version string."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def resolve_path(value: str, source: Path, follow_links: bool = True) -> Path | None:
    """``value`` as an existing path: absolute, or relative to the experiment file's folder, any folder above it, or
    the current one; resolved through symlinks unless ``follow_links`` is False (a venv's bin/python, a link to
    the base interpreter: only the link's own path makes Python take the environment's packages)."""
    try:
        p = Path(value).expanduser()
        if p.is_absolute():
            return p if p.exists() else None
        for base in [source.parent.resolve(), *source.parent.resolve().parents, Path.cwd()]:
            if (base / p).exists():
                return (base / p).resolve() if follow_links else Path(os.path.abspath(base / p))
    except (OSError, ValueError, RuntimeError):  # NUL bytes, names too long, symlink loops: not a usable path
        return None
    return None
