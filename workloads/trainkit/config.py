"""Typed training config whose field docstrings are also the ``--help`` text."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import os
import textwrap
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass
class TrainConfig:
    steps: int = 60
    """Optimizer steps to reach in total, counted across restarts (a resumed run stops at the same step)."""

    seed: int = 0
    """Seeds the model init, the dataset, the epoch permutations and the per-rank dropout RNG."""

    dataset_size: int = 250
    """Synthetic samples per epoch. 250 with 2 ranks x batch 4 gives a short last step (2 samples, rank 1 gets none) and ~2 epochs in 60 steps."""

    batch_size: int = 4
    """Samples per rank per step (the global batch is batch_size x world_size; the last step of an epoch may be short)."""

    in_dim: int = 16
    """Input features per sample."""

    hidden: int = 64
    """Hidden width of the 3-layer MLP."""

    n_classes: int = 4
    """Output classes."""

    dropout: float = 0.1
    """Dropout probability (makes the per-rank RNG state part of what a checkpoint must restore)."""

    lr: float = 0.01
    """AdamW learning rate."""

    lr_step: int = 20
    """StepLR period in steps."""

    lr_gamma: float = 0.5
    """StepLR decay factor."""

    step_sleep: float = 0.05
    """Seconds to sleep after each step, so a harness has time to inject faults mid-run."""

    log_every: int = 10
    """Rank 0 prints 'step N epoch E loss L' every N steps (0: never)."""

    ckpt_dir: str = ""
    """Checkpoint directory; empty means $CHAOS_CKPT_DIR, else ./ckpt."""

    ckpt_every: int = 10
    """Save a checkpoint every N steps (0: never)."""

    ckpt_keep: int = 3
    """Committed checkpoints to keep; older ones are deleted after a newer one commits."""

    ckpt_retries: int = 3
    """Attempts per save before it is abandoned with a ckpt_error event (training continues)."""

    ckpt_retry_wait_s: float = 0.2
    """First backoff between save attempts, doubled per attempt (capped at 2 s)."""

    ckpt_write_delay_s: float = 0.0
    """Seconds each save waits after writing its files and before sealing them: a stand-in for slow storage that widens the window in which a kill tears a save, whatever the machine's speed."""

    ckpt_start_delay_s: float = 0.0
    """Seconds an asynchronous save's background writer waits after the staging before it begins (its ckpt_begin): a stand-in for a writer still busy with the previous save or queued behind others, which widens the window in which the state exists only as the staged copy in memory."""

    ckpt_commit_delay_s: float = 0.0
    """Seconds each save waits after every rank's files are written and fsynced (its ckpt_durable event) and before rank 0 commits it (manifest, rename, latest): a stand-in for a slow commit (a metadata service, an object store's rename) that widens the window in which the data is durable and not committed."""

    ckpt_read_delay_s: float = 0.0
    """Seconds each checkpoint load waits before reading: a stand-in for slow storage on restore (ci/bench/gate_noise.py's slowed restore)."""

    async_save: bool = False
    """Stage the state in CPU memory and write it in a background thread (same commit guarantees)."""

    pg_timeout_s: float = 60.0
    """Process-group init and collective timeout, so a dead or hung peer is detected fast."""

    save_on_sigterm: bool = True
    """On SIGTERM (a scheduler's preemption notice, torchrun shutting down) finish the step, save a checkpoint and exit 143, instead of dying with the steps since the last save."""

    sigterm_grace_s: float = 20.0
    """With save_on_sigterm: how long after SIGTERM the loop may take to reach the end of a step (where every rank agrees to stop and saves); a rank that does not (stuck in a collective whose peer is gone) exits then without saving, instead of holding its launcher until the launcher's own SIGKILL (torchrun waits 30 s). Below torchrun's 30 s, and well above a step: a preempted job on a loaded machine was seen stalled 5 s before its save. 0: wait for the loop however long."""

    straggler_factor: float = 0.0
    """Name a rank whose own time per step (outside collectives) is this many times its peers' in a health event (0: no straggler detection)."""

    straggler_window: int = 10
    """Steps per straggler judgement; a rank must be slow in two windows in a row to be named."""

    straggler_policy: str = "alert"
    """alert: only the health event. eject: also save now, record the slow rank's device as excluded and stop the launch, so the scheduler relaunches without it."""

    link_probe_every: int = 0
    """Every N steps, time a ring exchange of link_probe_kb between ranks and name, in a health event, a rank whose outgoing link is link_factor times slower than its peers' (0: no link probe). Own time cannot see a slow link: every rank waits for it alike."""

    link_probe_kb: int = 256
    """Payload of each rank's probe: large enough that a capped link takes milliseconds, small enough to cost nothing on a healthy one."""

    link_factor: float = 3.0
    """How many times its peers' probe time a link must take, in two windows of 3 probes in a row, to be named."""

    replica_check_every: int = 0
    """Every N steps and before every save (periodic, health, preemption), compare an exact checksum of every rank's parameters; on disagreement (silent data corruption on a rank) name the rank in a health event and exit, so torchrun restarts from the last checkpoint (0: off; DDP only: FSDP shards hold no replicas)."""

    nonfinite: str = "off"
    """What to do about a step whose loss or gradients are not finite (NaN, Inf) on any rank: off (train on, as a stack without a guard does), restart (name it in a health event and exit, so torchrun restarts from the last checkpoint), rollback (name it and reload the last checkpoint in-process, then train the steps again; a bad step that comes back before the job got past it exits for a restart), skip (name it and drop the step's update, as a loss scaler does: the batch is never trained)."""

    nonfinite_exclude_after: int = 0
    """With --nonfinite restart or rollback: the K-th bad step of one device (counted across restarts, in the checkpoint folder) excludes it: the rank records the exclusion and every rank stops the launch, which the scheduler starts again without that device (0: never; a persistent fault then restarts until max_restarts)."""

    nvrx_heartbeats: bool = False
    """Send NVIDIA Resiliency Extension rank heartbeats (one per step) to the rank monitor ft_launcher runs beside each rank, which kills and restarts the worker group when a rank's heartbeats stop (chaos.integrations.nvrx). Needs ft_launcher (workload.launcher: ft_launcher) and the [nvrx] extra."""


def field_docs(cls: type) -> dict[str, str]:
    """The docstring written right below each dataclass field, by field name."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def parse_bool(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def build_parser(cls: type, description: str = "") -> argparse.ArgumentParser:
    """An argparse parser with one ``--kebab-case`` flag per field of ``cls``."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        help_text = docs.get(f.name, "")
        kind = f.type if isinstance(f.type, type) else eval(f.type, {}, {})  # postponed annotations
        if kind is bool:
            # Accept both "--async-save" and "--async-save true" (the harness passes key value).
            parser.add_argument(flag, type=parse_bool, nargs="?", const=True, default=f.default, help=help_text)
        else:
            parser.add_argument(flag, type=kind, default=f.default, help=help_text)
    return parser


def parse_config(cls: type[T], argv: list[str] | None = None, description: str = "") -> T:
    args = build_parser(cls, description).parse_args(argv)
    cfg = cls(**vars(args))
    if hasattr(cfg, "ckpt_dir") and not cfg.ckpt_dir:  # type: ignore[attr-defined]
        cfg.ckpt_dir = os.environ.get("CHAOS_CKPT_DIR") or "./ckpt"  # type: ignore[attr-defined]
    return cfg
