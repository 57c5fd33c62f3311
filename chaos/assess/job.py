"""The user's job as ``chaos assess`` was given it: a script the harness launches under torchrun, or the user's own
launch command; the workload section every experiment of the assessment shares; the stack its source imports.

Every run of the job gets a working directory of its own (``{run_dir}/work``): a script that saves where it runs
would otherwise resume the previous run's checkpoint, and an assessment must never write into the user's
folder. So paths the user gave relative to where they stood are made absolute first."""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import UsageError
from chaos.runtime.launch import script_args

WORK_DIR = "{run_dir}/work"

# What a module the job imports says about the stack it runs on, in the words the report uses. Read from the
# source (the script and the modules beside it it imports), not from a running rank: stated as such.
STACKS: tuple[tuple[str, str], ...] = (
    ("transformers", "Hugging Face Transformers"),
    ("chaos.integrations.hf", "Hugging Face Transformers"),
    ("chaos.integrations.lightning", "Lightning"),
    ("chaos.integrations.accelerate", "Accelerate"),
    ("lightning", "Lightning"),
    ("pytorch_lightning", "Lightning"),
    ("accelerate", "Accelerate"),
    ("torchft", "torchft"),
    ("torchdata", "torchdata"),
    ("datasets", "Hugging Face datasets"),
    ("streaming", "MosaicML streaming"),
    ("litdata", "litdata"),
    ("nvidia_resiliency_ext", "NVIDIA Resiliency Extension"),
)
BOUND = ("transformers", "lightning", "accelerate")
"""Stacks whose module name is specific enough to count when the source only names it (no import statement)."""
NAMES: tuple[tuple[str, str], ...] = (
    # Names in the source that say how the model is wrapped (a call or an import of them).
    ("DistributedDataParallel", "DDP"),
    ("FullyShardedDataParallel", "FSDP"),
    ("fully_shard", "FSDP2"),
    ("StatefulDataLoader", "StatefulDataLoader"),
    ("DistributedSampler", "DistributedSampler"),
    ("dcp", "torch.distributed.checkpoint"),
    ("distributed.checkpoint", "torch.distributed.checkpoint"),
)


@dataclass(frozen=True)
class Job:
    """How the job is launched: ``script`` (+ ``nproc``, ``args``) or ``command``."""

    script: Path | None = None
    command: tuple[str, ...] | None = None
    nproc: int = 2
    args: dict[str, Any] = field(default_factory=dict)
    max_restarts: int = 3
    python: str | None = None

    @classmethod
    def of(cls, given: list[str], *, nproc: int = 2, args: list[str] | None = None, max_restarts: int = 3,
           python: str | None = None, cwd: Path | None = None) -> "Job":
        """The job from the command line's words: one ``.py`` file (a script), or a launch command."""
        cwd = cwd or Path.cwd()
        if not given:
            raise UsageError("chaos assess needs the job: a training script (chaos assess train.py) or your launch "
                             "command after '--' (chaos assess -- torchrun --nproc-per-node 2 train.py)")
        parsed = _args(args or [])
        if len(given) == 1 and given[0].endswith(".py"):
            script = (cwd / given[0]).resolve()
            if not script.is_file():
                raise UsageError(f"{given[0]}: no such training script (looked in {cwd}); give its path")
            return cls(script=script, nproc=nproc, args=parsed, max_restarts=max_restarts, python=python)
        if parsed:
            raise UsageError("--arg is for a script the harness launches; with a launch command, put the script's "
                             "arguments in the command itself")
        return cls(command=tuple(_absolute(w, cwd) for w in given), nproc=nproc, max_restarts=max_restarts,
                   python=python)

    @property
    def name(self) -> str:
        source = self.source
        return (source.stem if source is not None else Path(self.command[0]).name if self.command else "job") \
            .replace("_", "-").lower()

    @property
    def source(self) -> Path | None:
        """The training script: ``script``, or the first ``.py`` file of the command."""
        if self.script is not None:
            return self.script
        return next((Path(w) for w in self.command or () if w.endswith(".py") and Path(w).is_file()), None)

    def describe(self) -> str:
        if self.script is not None:
            return shlex.join(["torchrun", "--nproc-per-node", str(self.nproc), str(self.script),
                               *script_args(self.args)])  # as the launcher passes them
        return shlex.join(self.command or ())

    def workload(self, *, experiments_dir: Path, step_regex: str | None = None,
                 ckpt_dir: str | None = None) -> dict[str, Any]:
        """The workload section, with the script's path relative to where the experiment files are written (so a
        repository that keeps them keeps working from another checkout)."""
        out: dict[str, Any]
        if self.script is not None:
            out = {"script": _relative(self.script, experiments_dir), "nproc_per_node": self.nproc,
                   "max_restarts": self.max_restarts}
            if self.args:
                out["args"] = dict(self.args)
        else:
            out = {"command": list(self.command or ())}
        if self.python:
            out["python"] = self.python
        out["cwd"] = WORK_DIR
        if ckpt_dir:
            out["ckpt_dir"] = ckpt_dir
        if step_regex:
            out["step_regex"] = step_regex
        return out

    def stack(self) -> list[str]:
        """What the source imports or calls that names a stack, in first-seen order."""
        source = self.source
        if source is None:
            return []
        seen: list[str] = []
        for path in _sources(source):
            try:
                tree = ast.parse(path.read_text(errors="replace"))
            except (OSError, SyntaxError, ValueError):
                continue
            modules, names = _imports_and_names(tree)
            for module, label in STACKS:
                # A module bound by name (``transformers = require("transformers")``) counts as imported.
                if (module in modules or module in BOUND and module in names) and label not in seen:
                    seen.append(label)
            for name, label in NAMES:
                if (name in names or name in modules) and label not in seen:
                    seen.append(label)
        return seen


def _absolute(word: str, cwd: Path) -> str:
    """A word of the command that names a path where the user stands, made absolute (the job runs in a directory
    of its own): a ``.py`` file, or a file or folder written as a path (``./conf``, ``data/train``). A bare word
    (``torchrun``, ``30``) or a flag stays as written, even where a file of that name happens to be here."""
    if word.startswith("-"):
        return word
    path = cwd / word
    named = word.endswith(".py") and path.is_file() or "/" in word and path.exists()
    return str(path.resolve()) if named else word


def _args(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--arg {pair!r}: give KEY=VALUE (e.g. --arg steps=60)")
        out[key.strip().lstrip("-").replace("-", "_")] = _scalar(value.strip())
    return out


def _scalar(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _relative(path: Path, start: Path) -> str:
    import os

    try:
        return os.path.relpath(path, start.resolve())
    except ValueError:  # another drive
        return str(path)


def _sources(script: Path) -> list[Path]:
    """The script and the local modules it imports (one level): ``from pkg import mod`` reads pkg/__init__.py and
    pkg/mod.py, not the rest of pkg, whose other modules this script may never load."""
    out = [script]
    try:
        tree = ast.parse(script.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return out
    wanted: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted += [script.parent.joinpath(*a.name.split(".")) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            base = script.parent.joinpath(*node.module.split("."))
            wanted += [base] + [base / a.name for a in node.names]
    for path in wanted:
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file() and candidate not in out:
                out.append(candidate)
    return out


def _imports_and_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    modules: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules.add(alias.name.split(".")[0])
                modules.add(alias.name)
                if alias.asname:
                    names.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
            modules.add(node.module)
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    # 'distributed.checkpoint' is looked for as a module path
    modules |= {m.partition(".")[2] for m in list(modules) if m.startswith("torch.")}
    return modules, names
