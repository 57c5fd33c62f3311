"""The experiment as the harness runs it: a typed, validated ``Experiment`` (workload, faults with their triggers,
checks, target, game day) and the file model it is read through. Loading: chaos.spec.load; schema: chaos.spec.schema."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from chaos.spec.configs import CheckConfig, FaultConfig, StrictConfig, TargetConfig
from chaos.spec.gameday import GamedayConfig, Scheduled
from chaos.spec.gate import GateConfig
from chaos.spec import interpreter
from chaos.spec.workload import (DEVICE_ENV, SOURCE_SUFFIXES, STACK_PACKAGES, THREAD_ENV, WorkloadConfig, _arg_paths,
                                 _beside, installed_version, resolve_path)

COMBINATORS = ("any", "all")
MAX_TRIGGER_DEPTH = 8
"""How deeply any/all may nest (a JSON Schema cannot say it: the loader alone checks it)."""


class TriggerModifiers(StrictConfig):
    """What every trigger may add beside its kind: the loader validates them through this model and the JSON
    Schema is generated from it, so their limits are written once."""

    delay_s: float = Field(default=0.0, ge=0, le=86400, strict=True)
    """Inject this many seconds after the trigger fires."""
    times: int | None = Field(default=None, ge=1, le=100000, strict=True)
    """How many times a repeating trigger may fire (every_steps, poisson); unset: as often as it comes due."""


TRIGGER_MODIFIERS = tuple(TriggerModifiers.model_fields)


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
    gate: GateConfig | None = None
    """A coverage plan: the workload is a health gate, run once per fault (``chaos coverage``)."""

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
        # The script is known by its bytes and its helpers' (above), not by the path the file names it by: the same
        # script named from two folders (chaos assess's observation and the experiments it writes) is one golden.
        payload = self.workload.model_dump(exclude={"script", "join_timeout_s", "stall_s", "max_restarts", "ckpt_dir",
                                                    "cwd", "golden_omits"})
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
        if self.workload.python is not None:
            # The job's own environment, whole: where it is, its Python, and every distribution in it (a torchft
            # upgraded there is another computation, though the experiment file is the same).
            python = interpreter.workload_python(self)
            h.update(f"{Path(python).absolute()};{';'.join(interpreter.environment(python))}".encode())
            return h.hexdigest()[:16]
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


class KnownFailure(StrictConfig):
    """A finding about the stack under test, kept visible: these checks are expected to FAIL, for this reason."""

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


class ExperimentFile(StrictConfig):
    """The top level of an experiment YAML file."""

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
    gate: GateConfig | None = None
    """A coverage plan for a health gate: the workload is the gate (any command or script; exit 0 means
    healthy), and ``chaos coverage`` runs it once per fault in ``faults``, each alone on a fresh target, and
    on healthy runs; a fault without a trigger is there before the gate starts (``before_launch``)."""
