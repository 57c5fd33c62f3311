"""The experiment file: a typed schema, loaded from YAML with every problem located by file, line and YAML path."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from chaos.checks.base import CheckConfig
from chaos.errors import ExperimentError, Problem
from chaos.faults.base import FaultConfig
from chaos.gameday.plan import GamedayConfig, Scheduled, draw
from chaos.registry import CHECKS, FAULTS, TARGETS, TRIGGERS, suggest
from chaos.targets.base import TargetConfig

Scalar = Union[str, int, float, bool]
COMBINATORS = ("any", "all")
TRIGGER_MODIFIERS = ("delay_s", "times")


class WorkloadConfig(BaseModel):
    """What to train, and how torchrun launches it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    script: str | None = None
    """A training script the harness launches under torchrun (path relative to the experiment file, or its parent directories)."""
    command: list[str] | None = None
    """Your own launch command instead of ``script`` (e.g. ["torchrun", ..., "train.py"]). {run_dir}, {ckpt_dir}, {port}, {nproc_per_node}, {nnodes}, {node_rank}, {master_addr} are substituted."""
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


@dataclass
class TriggerSpec:
    """A validated trigger: what to build, plus the modifiers shared by every kind."""

    raw: Any
    delay_s: float = 0.0
    times: int | None = None

    def describe(self) -> str:
        """Readable: ``at_step 500``, ``on_event {"on_event":"ckpt_commit","nth":2}``, ``any(...)``."""
        text = _describe_trigger(self.raw)
        if self.delay_s:
            text += f" + delay_s {self.delay_s:g}"
        return text


def _describe_trigger(raw: Any) -> str:
    if not isinstance(raw, dict) or len(raw) != 1:
        return json.dumps(raw, separators=(",", ":"))
    (kind, params), = raw.items()
    if kind in COMBINATORS and isinstance(params, list):
        return f"{kind}({', '.join(_describe_trigger(p) for p in params)})"
    if isinstance(params, dict) and set(params) == {kind}:
        params = params[kind]
    return f"{kind} {json.dumps(params, separators=(',', ':'))}"


@dataclass
class FaultSpec:
    kind: str
    config: FaultConfig
    trigger: TriggerSpec
    index: int


@dataclass
class CheckSpec:
    kind: str
    config: CheckConfig


@dataclass
class Experiment:
    name: str
    description: str
    workload: WorkloadConfig
    target: TargetConfig
    target_kind: str
    faults: list[FaultSpec]
    checks: list[CheckSpec]
    timeout_s: float
    seed: int
    source: Path
    raw: dict[str, Any] = field(default_factory=dict)
    known_failure: KnownFailure | None = None
    gameday: GamedayConfig | None = None
    schedule: list[Scheduled] = field(default_factory=list)
    """A game day's drawn faults (also in ``faults``, in the same order)."""

    def resolve_script(self) -> Path | None:
        """The workload script, relative to the experiment file's folder or any folder above it."""
        if self.workload.script is None:
            return None
        return resolve_path(self.workload.script, self.source)

    def workload_hash(self) -> str:
        """Identity of the training config alone (for the golden cache): script bytes, args, world shape."""
        h = hashlib.sha256()
        scripts = [self.resolve_script()] if self.workload.script is not None else self._command_files()
        for script in scripts:
            if script is None:
                continue
            h.update(script.read_bytes())
            # The script's own modules and config files beside it (e.g. workloads/trainkit/, a YAML
            # the script reads): a change there changes what a fault-free run computes just as much
            # as a change to the script itself.
            for helper in _beside(script):
                h.update(str(helper.relative_to(script.parent)).encode())
                h.update(helper.read_bytes())
        payload = self.workload.model_dump(exclude={"join_timeout_s", "stall_s", "max_restarts", "ckpt_dir", "cwd", "golden_omits"})
        payload["args"] = self.workload.golden_args()
        payload["target"] = self.target.golden_key()
        payload["seed"] = self.seed
        # The ranks inherit the harness's environment, and the number of intra-op threads changes the
        # order of a float reduction, so a digest, in a workload that does not fix its own (the
        # framework scripts do not): a golden computed under another count is not this run's.
        threads = {k: os.environ[k] for k in THREAD_ENV if k in os.environ}
        if threads:
            payload["threads"] = threads
        # The device and its numeric settings: another GPU set, TF32 or a cuBLAS workspace changes the sums.
        device = {k: os.environ[k] for k in DEVICE_ENV if k in os.environ}
        if device:
            payload["device_env"] = device
        h.update(json.dumps(payload, sort_keys=True, default=str).encode())
        # The stack's own packages compute the run as much as the script does (an upgraded Trainer
        # changes its sampler, its scheduler, its defaults).
        for dist in STACK_PACKAGES:
            version = installed_version(dist)
            if version is not None:
                h.update(f"{dist}=={version};".encode())
        return h.hexdigest()[:16]

    def _command_files(self) -> list[Path]:
        """The scripts and config files a ``command:`` workload names (its own files, never the
        interpreter or launcher), where they exist: relative to its cwd or to the experiment file."""
        out: list[Path] = []
        cwd = self.workload.cwd if self.workload.cwd and "{" not in self.workload.cwd else None
        for arg in self.workload.command or []:
            if "{" in arg:
                continue
            for candidate in _arg_paths(arg):
                if candidate.suffix not in SOURCE_SUFFIXES:
                    continue
                found = None
                if candidate.is_absolute():
                    found = candidate if candidate.is_file() else None
                else:
                    for base in ([Path(cwd).expanduser()] if cwd else []) + [self.source.parent]:
                        if (base / candidate).is_file():
                            found = (base / candidate).resolve()
                            break
                if found is not None and found not in out:
                    out.append(found)
        return out


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


def resolve_path(value: str, source: Path) -> Path | None:
    try:
        p = Path(value).expanduser()
        if p.is_absolute():
            return p if p.exists() else None
        for base in [source.parent.resolve(), *source.parent.resolve().parents, Path.cwd()]:
            if (base / p).exists():
                return (base / p).resolve()
    except (OSError, ValueError, RuntimeError):  # NUL bytes, names too long, symlink loops: not a usable path
        return None
    return None


class KnownFailure(BaseModel):
    """A finding about the stack under test, kept visible: these checks are expected to FAIL, for this reason."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    checks: list[str] = Field(min_length=1)
    """The checks expected to FAIL; any other verdict of theirs (or a FAIL of another check) is not the known failure."""
    signature: dict[str, str]
    """Per check in ``checks``, a regular expression its FAIL reason must match (``re.search``): the finding
    the failure is known by. A new bug that fails the same check for another reason is news, not this one."""
    reason: str = Field(min_length=1)
    """What the stack does wrong, and what a user changes to pass."""
    upstream: str | None = None
    """The upstream issue, when there is one."""

    @model_validator(mode="after")
    def _signed(self) -> "KnownFailure":
        unsigned = [c for c in self.checks if c not in self.signature]
        if unsigned:
            raise ValueError(f"known_failure.signature has no pattern for {', '.join(unsigned)}: give each check "
                             f"the finding it is known by, e.g. signature: {{{unsigned[0]}: 'duplicated'}} (a new bug "
                             f"that fails the same check must not keep the gate green)")
        extra = sorted(set(self.signature) - set(self.checks))
        if extra:
            raise ValueError(f"known_failure.signature names {', '.join(extra)}, which is not in known_failure.checks")
        for check, pattern in self.signature.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"known_failure.signature.{check}: not a regular expression ({exc})") from None
        return self


class ExperimentFile(BaseModel):
    """The top level of an experiment YAML file."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Short identifier, used in run directory names and test ids."""
    description: str = ""
    """One or two sentences: what is injected and what recovery is expected."""
    workload: WorkloadConfig
    target: Any = "local"
    """local | {kind: netns, nodes: 2, ...} | {kind: docker, ...}"""
    faults: list[Any] = Field(default_factory=list, max_length=1000)
    """Faults to inject, each {kind: ..., trigger: {...}, ...fields}."""
    checks: list[Any] = Field(default_factory=list, max_length=100)
    """Verdicts over the history, each {check-kind: {...fields}} or a bare check kind."""
    timeout_s: float = Field(default=300.0, gt=0, le=7 * 24 * 3600)
    """Wall-clock limit for the whole run; the workload is killed and every fault reverted when it passes."""
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    """Seeds every random choice the harness makes (random ranks, poisson triggers)."""
    known_failure: KnownFailure | None = None
    """The stack itself breaks a check (a finding): ``pytest experiments/`` reports it as an expected failure
    (strict: it fails the suite if the check starts passing, or another one fails). ``chaos run`` still FAILs."""
    gameday: GamedayConfig | None = None
    """A game day: a published failure mix, seeded and time-compressed, drawn into this run's faults."""


# --------------------------------------------------------------------------- YAML with line numbers

MAX_FILE_CHARS = 1_000_000
MAX_NODES = 100_000


def _expanded_size(root: yaml.Node | None) -> int | None:
    """How many values the document holds once aliases are expanded (capped); None for a recursive alias.

    Counted on the composed graph, where an alias is a shared node, so a YAML bomb costs linear time here
    instead of the exponential walk that validating the loaded data would take.
    """
    if root is None:
        return 0
    sizes: dict[int, int] = {}
    expanding: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        nid = id(node)
        kids = _children(node)
        if children_done:
            expanding.discard(nid)
            sizes[nid] = min(MAX_NODES + 1, 1 + sum(sizes[id(k)] for k in kids))
            continue
        if nid in sizes:
            continue
        if nid in expanding:  # only a node's own descendants are popped while it expands: a cycle
            return None
        expanding.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in kids)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _line_index(node: yaml.Node, path: tuple[Any, ...] = (), out: dict | None = None) -> dict:
    """Map each YAML path (tuple of keys/indices) to its 1-based line."""
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[path + (key,)] = key_node.start_mark.line + 1
            _line_index(value_node, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_index(item, path + (i,), out)
    return out


def _fmt_path(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Collector:
    def __init__(self, file: str, lines: dict) -> None:
        self.file = file
        self.lines = lines
        self.problems: list[Problem] = []

    def add(self, path: tuple[Any, ...], message: str) -> None:
        line = None
        for i in range(len(path), -1, -1):
            if path[:i] in self.lines:
                line = self.lines[path[:i]]
                break
        problem = Problem(self.file, line, _fmt_path(path), message)
        if problem not in self.problems:  # a game day's category override is checked once per drawn fault
            self.problems.append(problem)

    def add_validation(self, base: tuple[Any, ...], exc: ValidationError) -> None:
        for err in exc.errors():
            loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
            self.add(base + loc, _explain(err))


def _explain(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    msg = err.get("msg", "invalid")
    if kind == "extra_forbidden":
        return "unknown field; remove it or check its spelling (see 'chaos schema')"
    if kind == "missing":
        return "required field is missing"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    inp = err.get("input")
    if kind not in ("missing",) and isinstance(inp, (str, int, float, bool)) and len(repr(inp)) < 60:
        return f"{msg} (got {inp!r})"
    return msg


def _model_fields_hint(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def load_experiment(path: str | Path, text: str | None = None) -> Experiment:
    """Load and validate one experiment file; raises ExperimentError listing every problem."""
    path = Path(path)
    file = str(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ExperimentError([Problem(file, None, "", "file not found")]) from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ExperimentError([Problem(file, None, "", f"cannot read the file: {exc}")]) from None
    if len(text) > MAX_FILE_CHARS:
        raise ExperimentError([Problem(file, None, "", f"the file has {len(text)} characters; an experiment "
                                                       f"file is at most {MAX_FILE_CHARS} (a few dozen lines)")])
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        size = _expanded_size(node)
        if size is None:
            raise ExperimentError([Problem(file, None, "", "a YAML alias refers to itself (a recursive "
                                                           "anchor); write the value out instead")])
        if size > MAX_NODES:
            raise ExperimentError([Problem(file, None, "", f"the document expands to more than {MAX_NODES} "
                                                           f"values (YAML aliases that multiply, a 'billion "
                                                           f"laughs'?); write the values out instead")])
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ExperimentError([Problem(file, line, "", f"not valid YAML: {problem}")]) from None
    except RecursionError:
        raise ExperimentError([Problem(file, None, "", "YAML nesting is too deep")]) from None
    lines = _line_index(node) if node is not None else {}
    col = _Collector(file, lines)
    if not isinstance(data, dict):
        col.add((), "an experiment file must be a YAML mapping with at least 'name' and 'workload'")
        raise ExperimentError(col.problems)
    try:
        top = ExperimentFile.model_validate(data)
    except ValidationError as exc:
        col.add_validation((), exc)
        raise ExperimentError(col.problems) from None
    except RecursionError:
        raise ExperimentError([Problem(file, None, "", "the document is nested too deeply")]) from None

    target_kind, target_cfg = _validate_target(top.target, col)
    faults = [_validate_fault(i, f, col) for i, f in enumerate(top.faults)]
    schedule: list[Scheduled] = []
    if top.gameday is not None and target_kind:
        nodes = getattr(target_cfg, "nodes", 1)
        nodes = nodes if isinstance(nodes, int) else 1
        min_nodes = getattr(target_cfg, "min_nodes", None)
        schedule = draw(top.gameday, top.seed, target_kind, nproc_per_node=top.workload.nproc_per_node,
                        nodes=nodes, elastic=isinstance(min_nodes, int) and min_nodes < nodes)
        # Every override is checked, drawn or not: a typo must not wait for the seed that draws its category.
        for name, override in top.gameday.categories.items():
            if override.fault is None:
                continue
            where = ("gameday", "categories", name, "fault")
            spec = _validate_fault(-1, {**override.fault, "trigger": {"in_training": {"after_s": 0}}}, col, base=where)
            problem = _target_problem(spec.kind, target_kind) if spec is not None else None
            if problem:
                col.add(where + ("kind",), problem)
        for s in schedule:
            where = ("gameday", "categories", s.category, "fault") if s.overridden else ("gameday",)
            faults.append(_validate_fault(len(faults), s.fault, col, base=where))
    checks = [_validate_check(i, c, col) for i, c in enumerate(top.checks)]
    if top.gameday is not None:
        # A game day always says what struck the job, whatever else it checks. What it cost is in its
        # journal's goodput split and summary; the goodput check judges it only against a bound the
        # experiment sets (a goodput check with no bound would pass any goodput).
        listed = {c.kind for c in checks if c is not None}
        if "fault_mix" not in listed:
            checks.append(_validate_check(len(checks), "fault_mix", col))
    exp = Experiment(
        name=top.name, description=top.description, workload=top.workload,
        target=target_cfg, target_kind=target_kind,
        faults=[f for f in faults if f is not None], checks=[c for c in checks if c is not None],
        timeout_s=top.timeout_s, seed=top.seed, source=path, raw=data, known_failure=top.known_failure,
        gameday=top.gameday, schedule=schedule,
    )
    if exp.workload.script is not None and exp.resolve_script() is None:
        col.add(("workload", "script"),
                f"script '{exp.workload.script}' not found next to {file} or in any folder above it; "
                f"give a path relative to the experiment file or an absolute path")
    for where, value in _strings(data.get("workload"), ("workload",)):
        if "\0" in value:
            col.add(where, "contains a NUL byte, which no command line, path or environment variable can hold")
    if exp.workload.ckpt_dir is not None and "\0" not in exp.workload.ckpt_dir:
        # A path under the run directory is the run's own whatever follows.
        problem = None if exp.workload.ckpt_dir.startswith("{run_dir}") else _ckpt_dir_problem(exp.workload.ckpt_dir)
        if problem:
            col.add(("workload", "ckpt_dir"), problem)
    if exp.known_failure is not None:
        kinds = {c.kind for c in exp.checks}
        for i, name in enumerate(exp.known_failure.checks):
            if name not in kinds:
                col.add(("known_failure", "checks", i), f"'{name}' is not one of this experiment's checks "
                                                        f"({', '.join(sorted(kinds)) or 'none'})")
    for spec in exp.faults:
        if spec.index >= len(top.faults):
            continue  # a game day's drawn fault: checked through its category above
        problem = _target_problem(spec.kind, target_kind)
        if problem:
            col.add(("faults", spec.index, "kind"), problem)
    if col.problems:
        raise ExperimentError(col.problems)
    return exp


def _target_problem(kind: str, target_kind: str) -> str | None:
    needs = FAULTS.get(kind).needs_target
    if needs and target_kind and target_kind not in needs:
        return (f"fault '{kind}' needs nodes with their own addresses: use target {' or '.join(needs)} "
                f"(this experiment's target is '{target_kind}')")
    return None


_SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/mnt", "/opt", "/proc", "/root",
                "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var")


def _strings(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    """Every string (keys included) under ``value`` with its YAML path."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += _strings(k, path) + _strings(v, path + (k,))
        return out
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, path + (i,))]
    return []


def _ckpt_dir_problem(value: str) -> str | None:
    """Why ``value`` cannot be the run's checkpoint directory: storage faults mount over it and
    corrupt-checkpoint rewrites files in it, so it must be a directory of the run's own."""
    if len(value) > 1024:
        return "the path is too long; give a short directory of the run's own"
    try:
        path = Path(value).expanduser().resolve()
        if str(path) in _SYSTEM_DIRS or path == Path.home():
            return (f"'{path}' is a system or home directory: storage faults mount over the checkpoint directory "
                    f"and corrupt-checkpoint rewrites files in it; give a directory of its own, e.g. "
                    f"/scratch/chaos-ckpt")
        if path.exists() and not path.is_dir():
            return f"'{path}' exists and is not a directory"
    except (OSError, RuntimeError) as exc:
        return f"not a usable path ({exc})"
    return None


def _validate_target(raw: Any, col: _Collector) -> tuple[str, TargetConfig]:
    if isinstance(raw, str):
        raw = {"kind": raw}
    if not isinstance(raw, dict) or "kind" not in raw:
        col.add(("target",), "target must be a kind name (local, netns, docker) or a mapping with 'kind'")
        return "", TargetConfig()
    kind = raw["kind"]
    cls = TARGETS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        col.add(("target", "kind") if isinstance(raw.get("kind"), str) else ("target",),
                TARGETS.unknown_message(kind))
        return "", TargetConfig()
    try:
        return kind, cls.Config.model_validate({k: v for k, v in raw.items() if k != "kind"})
    except ValidationError as exc:
        col.add_validation(("target",), exc)
        return "", TargetConfig()


def _validate_fault(i: int, raw: Any, col: _Collector, base: tuple[Any, ...] | None = None) -> FaultSpec | None:
    base = base or ("faults", i)
    if not isinstance(raw, dict):
        col.add(base, "a fault must be a mapping like {kind: kill-rank, rank: 1, trigger: {at_step: 25}}")
        return None
    kind = raw.get("kind")
    if kind is None:
        col.add(base, f"missing 'kind'; known: {', '.join(FAULTS.kinds())}")
        return None
    cls = FAULTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        col.add(base + ("kind",), FAULTS.unknown_message(kind))
        return None
    fields = {k: v for k, v in raw.items() if k != "kind"}
    for key in fields:
        if isinstance(key, str) and key not in cls.Config.model_fields:
            col.add(base + (key,), f"unknown field for fault '{kind}'; its fields: "
                    f"{_model_fields_hint(cls.Config)}.{suggest(key, list(cls.Config.model_fields))}")
    fields = {k: v for k, v in fields.items() if k in cls.Config.model_fields}
    if "trigger" not in raw:
        col.add(base, "missing 'trigger' (when to inject), e.g. trigger: {at_step: 25}")
        return None
    trigger = _validate_trigger(raw["trigger"], base + ("trigger",), col)
    try:
        config = cls.Config.model_validate(fields)
    except ValidationError as exc:
        col.add_validation(base, exc)
        return None
    if trigger is None:
        return None
    return FaultSpec(kind=kind, config=config, trigger=trigger, index=i)


def _validate_trigger(raw: Any, path: tuple[Any, ...], col: _Collector, depth: int = 0) -> TriggerSpec | None:
    example = "e.g. {at_step: 25}, {after_s: 10}, {on_event: ckpt_begin}, {any: [{at_step: 25}, {after_s: 60}]}"
    if depth > 8:
        col.add(path, "triggers are nested too deeply (at most 8 levels of any/all)")
        return None
    if not isinstance(raw, dict) or not raw:
        col.add(path, f"a trigger must be a mapping naming one trigger kind, {example}")
        return None
    modifiers = {k: raw[k] for k in TRIGGER_MODIFIERS if k in raw}
    kinds = [k for k in raw if k not in TRIGGER_MODIFIERS]
    ok = True
    delay = modifiers.get("delay_s", 0.0)
    if not isinstance(delay, (int, float)) or isinstance(delay, bool) or not 0 <= delay <= 86400:
        col.add(path + ("delay_s",), "delay_s must be a number of seconds between 0 and 86400")
        ok = False
    times = modifiers.get("times")
    if times is not None and (not isinstance(times, int) or isinstance(times, bool) or not 1 <= times <= 100000):
        col.add(path + ("times",), "times must be a whole number from 1 to 100000")
        ok = False
    named = [k for k in kinds if k in COMBINATORS or (isinstance(k, str) and TRIGGERS.get(k) is not None)]
    flat: dict[str, Any] = {}
    if len(named) == 1 and len(kinds) > 1 and named[0] not in COMBINATORS:
        # The flat form {on_event: ckpt_begin, step: 20}: the other keys are the kind's own fields.
        cls = TRIGGERS.get(named[0])
        flat = {k: raw[k] for k in kinds if k != named[0]}
        unknown = [k for k in flat if k not in cls.Params.model_fields or k == cls.shorthand]
        for k in unknown:
            fields = [f for f in cls.Params.model_fields if f != cls.shorthand]
            col.add(path + (k,), f"unknown field for trigger '{named[0]}'; its fields: "
                                 f"{', '.join(fields) or 'none'}{suggest(str(k), fields)}")
        if unknown:
            return None
        if isinstance(raw[named[0]], dict):
            col.add(path, f"give the fields of '{named[0]}' either inside it or beside it, not both")
            return None
        kinds = named
    if len(kinds) != 1:
        known = TRIGGERS.kinds() + list(COMBINATORS)
        if not kinds:
            col.add(path, f"no trigger kind given; known: {', '.join(known)}")
        elif len(named) > 1:
            col.add(path, f"one trigger kind per mapping (got {', '.join(map(str, named))}); "
                          f"combine several with any: [...] or all: [...]")
        else:
            strays = [str(k) for k in kinds if k not in named]
            col.add(path + (strays[0],), TRIGGERS.unknown_message(strays[0]).replace(
                "; known:", f"; known: {', '.join(COMBINATORS)},"))
        return None
    kind = kinds[0]
    value = raw[kind] if not flat else {TRIGGERS.get(kind).shorthand: raw[kind], **flat}
    if kind in COMBINATORS:
        if not isinstance(value, list) or not value:
            col.add(path + (kind,), f"'{kind}' takes a non-empty list of triggers, {example}")
            return None
        parts = [_validate_trigger(v, path + (kind, j), col, depth + 1) for j, v in enumerate(value)]
        if any(p is None for p in parts):
            return None
        clean = {kind: [p.raw for p in parts]}  # type: ignore[union-attr]
        return TriggerSpec(clean, float(delay), times) if ok else None
    cls = TRIGGERS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        col.add(path + (kind,), TRIGGERS.unknown_message(kind).replace(
            "; known:", f"; known: {', '.join(COMBINATORS)},"))
        return None
    params = value if isinstance(value, dict) else {cls.shorthand: value}
    if isinstance(value, dict) and cls.shorthand:
        params = {cls.shorthand: params.pop(cls.shorthand, None), **params} if cls.shorthand in value else params
    try:
        validated = cls.Params.model_validate(params)
    except ValidationError as exc:
        col.add_validation(path + (kind,), exc)
        return None
    clean = {kind: validated.model_dump(exclude_defaults=False)}
    return TriggerSpec(clean, float(delay), times) if ok else None


def _validate_check(i: int, raw: Any, col: _Collector) -> CheckSpec | None:
    base = ("checks", i)
    if isinstance(raw, str):
        raw = {raw: {}}
    if not isinstance(raw, dict) or len(raw) != 1:
        col.add(base, "a check is one mapping {check-kind: {fields}} or a bare check kind, "
                      "e.g. '- exactly_once: {}' or '- completes: {max_restarts: 1}'")
        return None
    (kind, fields), = raw.items()
    cls = CHECKS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        col.add(base + (kind,) if isinstance(kind, str) else base, CHECKS.unknown_message(kind))
        return None
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        col.add(base + (kind,), f"the fields of check '{kind}' must be a mapping ({{}} for none); "
                                f"its fields: {_model_fields_hint(cls.Config) or 'none'}")
        return None
    try:
        config = cls.Config.model_validate(fields)
    except ValidationError as exc:
        col.add_validation(base + (kind,), exc)
        return None
    return CheckSpec(kind=kind, config=config)


# --------------------------------------------------------------------------- JSON Schema


def json_schema() -> dict[str, Any]:
    """A JSON Schema for experiment files, generated from the registered typed configs."""
    fault_models = [
        create_model(f"Fault_{kind}", __base__=cls.Config, kind=(Literal[kind], ...),  # type: ignore[valid-type]
                     trigger=(dict[str, Any], Field(description=FaultConfig.model_fields["trigger"].description)))
        for kind, cls in FAULTS.items()
    ]
    check_models = [
        create_model(f"Check_{kind}", __config__=ConfigDict(extra="forbid"),
                     **{kind: (cls.Config, ...)})  # type: ignore[call-overload]
        for kind, cls in CHECKS.items()
    ]
    target_models = [
        create_model(f"Target_{kind}", __base__=cls.Config, kind=(Literal[kind], ...))  # type: ignore[valid-type]
        for kind, cls in TARGETS.items()
    ]
    fault_union = Union[tuple(fault_models)] if fault_models else dict  # type: ignore[valid-type]
    check_union = Union[tuple(check_models + [Literal[tuple(CHECKS.kinds())]])]  # type: ignore[valid-type]
    target_union = Union[tuple(target_models + [Literal[tuple(TARGETS.kinds())]])]  # type: ignore[valid-type]
    model = create_model(
        "Experiment", __base__=ExperimentFile,
        target=(target_union, Field(default="local", description=ExperimentFile.model_fields["target"].description)),
        faults=(list[_discriminated(fault_union)], Field(default_factory=list)),  # type: ignore[valid-type]
        checks=(list[check_union], Field(default_factory=list)),  # type: ignore[valid-type]
    )
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "chaos experiment"
    return schema


def _discriminated(union: Any) -> Any:
    return Annotated[union, Field(discriminator="kind")]
