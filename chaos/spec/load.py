"""Loading an experiment file: YAML parsed safely (size and alias limits), every section validated against
the registered plugins' configs, and every problem reported at once with its file, line and YAML path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from chaos.errors import ExperimentError, Problem
from chaos.spec.interpreter import TARGETS_WITH_IMAGES
from chaos.registry import CHECKS, FAULTS, TARGETS, TRIGGERS
from chaos.spec.configs import TargetConfig
from chaos.spec.experiment import (COMBINATORS, MAX_TRIGGER_DEPTH, TRIGGER_MODIFIERS, CheckSpec, Experiment,
                                   ExperimentFile, FaultSpec, TriggerModifiers, TriggerSpec)
from chaos.spec.gate import plan_problems
from chaos.spec.problems import Collector, line_index, unknown_field_message
from chaos.spec.gameday import GamedayConfig, Scheduled, draw


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


def _model_fields_hint(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _alone(model: type[BaseModel], raw: Any) -> Any:
    """``raw`` validated as ``model`` where it is valid, else None (its errors are already reported)."""
    try:
        return model.model_validate(raw)
    except (ValidationError, RecursionError):
        return None


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
    lines = line_index(node) if node is not None else {}
    col = Collector(file, lines)
    if not isinstance(data, dict):
        col.add((), "an experiment file must be a YAML mapping with at least 'name' and 'workload'")
        raise ExperimentError(col.problems)
    top: ExperimentFile | None = None
    refused: set[Any] = set()
    try:
        top = ExperimentFile.model_validate(data)
    except ValidationError as exc:
        # Reported, and the sections below are still validated from the file as written: a misspelled
        # workload field must not hide a bad target, fault, trigger or check further down (one run of
        # 'chaos validate' shows every problem). Only what needs the whole file valid (a game day's draw,
        # the checks across sections at the end) waits for the next run.
        col.add_validation((), exc, ExperimentFile, "the experiment file")
        refused = {err["loc"][0] for err in exc.errors() if err["loc"]}
    except RecursionError:
        raise ExperimentError([Problem(file, None, "", "the document is nested too deeply")]) from None

    def section(name: str, default: Any) -> Any:  # as validated, or as written where the file did not validate
        if top is not None:
            return getattr(top, name)
        return default if name in refused else data.get(name, default)

    gate = section("gate", None)
    gameday = top.gameday if top is not None else (
        None if "gameday" in refused or data.get("gameday") is None else _alone(GamedayConfig, data["gameday"]))
    target_kind, target_cfg = _validate_target(section("target", "local"), col)
    raw_faults = section("faults", [])
    if gate is not None:
        # A coverage plan's fault is there before the gate starts unless it says otherwise.
        raw_faults = [{**f, "trigger": {"before_launch": True}} if isinstance(f, dict) and "trigger" not in f else f
                      for f in raw_faults]
        if section("gameday", None) is not None:
            col.add(("gate",), "a file is a coverage plan (gate) or a game day (gameday), not both")
        if not raw_faults:
            col.add(("faults",), "a coverage plan needs faults: the gate is run once under each")
    faults = [_validate_fault(i, f, col) for i, f in enumerate(raw_faults)]
    schedule: list[Scheduled] = []
    if gameday is not None and target_kind:
        if top is not None:
            # A torchft job's nodes are its replica groups (rg0, rg1, ...).
            nodes = getattr(target_cfg, "nodes", None) or getattr(target_cfg, "replica_groups", 1)
            nodes = nodes if isinstance(nodes, int) else 1
            min_nodes = getattr(target_cfg, "min_nodes", None)
            schedule = draw(gameday, top.seed, target_kind, nproc_per_node=top.workload.nproc_per_node,
                            nodes=nodes, elastic=isinstance(min_nodes, int) and min_nodes < nodes,
                            min_nodes=min_nodes if isinstance(min_nodes, int) else None)
        if gameday.wait_for_groups_s is not None and target_kind != "torchft":
            col.add(("gameday", "wait_for_groups_s"), f"waits for a drop-replica job's replica groups: target torchft "
                                                      f"only (this one is {target_kind})")
        # Every override is checked, drawn or not: a typo must not wait for the seed that draws its category.
        for name, override in gameday.categories.items():
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
    checks = [_validate_check(i, c, col) for i, c in enumerate(section("checks", []))]
    if gameday is not None:
        # A game day always says what struck the job, whatever else it checks. What it cost is in its
        # journal's goodput split and summary; the goodput check judges it only against a bound the
        # experiment sets (a goodput check with no bound would pass any goodput).
        listed = {c.kind for c in checks if c is not None}
        if "fault_mix" not in listed:
            checks.append(_validate_check(len(checks), "fault_mix", col))
    if top is None:
        raise ExperimentError(col.problems)
    exp = Experiment(
        name=top.name, description=top.description, workload=top.workload,
        target=target_cfg, target_kind=target_kind,
        faults=[f for f in faults if f is not None], checks=[c for c in checks if c is not None],
        timeout_s=top.timeout_s, seed=top.seed, source=path, raw=data, known_failure=top.known_failure,
        gameday=top.gameday, schedule=schedule, gate=top.gate,
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
    if exp.workload.python is not None and target_kind in TARGETS_WITH_IMAGES:
        col.add(("workload", "python"), f"target {target_kind} runs the workload in an image: name the image's "
                                        f"interpreter as the target's python, not workload.python (a host path)")
    if exp.known_failure is not None:
        kinds = {c.kind for c in exp.checks}
        for i, name in enumerate(exp.known_failure.checks):
            if name not in kinds:
                col.add(("known_failure", "checks", i), f"'{name}' is not one of this experiment's checks "
                                                        f"({', '.join(sorted(kinds)) or 'none'})")
    if exp.gate is not None:
        for where, message in plan_problems(exp.gate, exp.faults):
            col.add(where, message)
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


def _validate_target(raw: Any, col: Collector) -> tuple[str, TargetConfig]:
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
        col.add_validation(("target",), exc, cls.Config, f"target '{kind}'")
        return "", TargetConfig()


def _validate_fault(i: int, raw: Any, col: Collector, base: tuple[Any, ...] | None = None) -> FaultSpec | None:
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
    config = None
    try:  # unknown fields and bad values alike, in one pass: pydantic collects them all
        config = cls.Config.model_validate({k: v for k, v in raw.items() if k != "kind"})
    except ValidationError as exc:
        col.add_validation(base, exc, cls.Config, f"fault '{kind}'")
    if "trigger" not in raw:
        col.add(base, "missing 'trigger' (when to inject), e.g. trigger: {at_step: 25}")
        return None
    trigger = _validate_trigger(raw["trigger"], base + ("trigger",), col)
    if config is None or trigger is None:
        return None
    return FaultSpec(kind=kind, config=config, trigger=trigger, index=i)


def _validate_trigger(raw: Any, path: tuple[Any, ...], col: Collector, depth: int = 0) -> TriggerSpec | None:
    example = "e.g. {at_step: 25}, {after_s: 10}, {on_event: ckpt_begin}, {any: [{at_step: 25}, {after_s: 60}]}"
    if depth > MAX_TRIGGER_DEPTH:
        col.add(path, f"triggers are nested too deeply (at most {MAX_TRIGGER_DEPTH} levels of any/all)")
        return None
    if not isinstance(raw, dict) or not raw:
        col.add(path, f"a trigger must be a mapping naming one trigger kind, {example}")
        return None
    modifiers = {k: raw[k] for k in TRIGGER_MODIFIERS if k in raw}
    kinds = [k for k in raw if k not in TRIGGER_MODIFIERS]
    try:
        mods = TriggerModifiers.model_validate(modifiers)
        ok, delay, times = True, mods.delay_s, mods.times
    except ValidationError as exc:
        col.add_validation(path, exc, TriggerModifiers, "every trigger")
        ok, delay, times = False, 0.0, None
    named = [k for k in kinds if k in COMBINATORS or (isinstance(k, str) and TRIGGERS.get(k) is not None)]
    flat: dict[str, Any] = {}
    if len(named) == 1 and len(kinds) > 1 and named[0] not in COMBINATORS:
        # The flat form {on_event: ckpt_begin, step: 20}: the other keys are the kind's own fields.
        cls = TRIGGERS.get(named[0])
        flat = {k: raw[k] for k in kinds if k != named[0]}
        unknown = [k for k in flat if k not in cls.Params.model_fields or k == cls.shorthand]
        for k in unknown:
            fields = [f for f in cls.Params.model_fields if f != cls.shorthand]
            col.add(path + (k,), unknown_field_message(str(k), fields, f"trigger '{named[0]}'"))
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
        col.add_validation(path + (kind,), exc, cls.Params, f"trigger '{kind}'")
        return None
    clean = {kind: validated.model_dump(exclude_defaults=False)}
    return TriggerSpec(clean, float(delay), times) if ok else None


def _validate_check(i: int, raw: Any, col: Collector) -> CheckSpec | None:
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
        col.add_validation(base + (kind,), exc, cls.Config, f"check '{kind}'")
        return None
    return CheckSpec(kind=kind, config=config)
