"""Problems in an experiment file, as a user reads them: each located by file, line and YAML path, and each of
pydantic's collected errors explained in words, an unknown field with the fields its section takes and the
closest of them wherever it is (workload, target, fault, trigger, check, or the file itself)."""

from __future__ import annotations

import types
import typing
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from chaos.errors import Problem
from chaos.registry import suggest


def line_index(node: yaml.Node, path: tuple[Any, ...] = (), out: dict | None = None) -> dict:
    """Map each YAML path (tuple of keys/indices) to its 1-based line."""
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[path + (key,)] = key_node.start_mark.line + 1
            line_index(value_node, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            line_index(item, path + (i,), out)
    return out


def _fmt_path(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class Collector:
    """Every problem of one file, each at the line of the nearest YAML path the file has (a missing field at
    its parent's line); a section's problems are added, never raised, so one run shows them all."""

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

    def add_validation(self, base: tuple[Any, ...], exc: ValidationError, model: type[BaseModel],
                       owner: str) -> None:
        """Every error pydantic collected validating ``model`` (``owner`` in words, e.g. "fault 'kill-rank'"),
        located under ``base``. An unknown field is explained with the fields of the model that refused it,
        found from the error's location, so a nested section gets its own list, not its parent's."""
        for err in exc.errors():
            loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
            if err.get("type") == "extra_forbidden" and loc:
                holder = model_at(model, loc[:-1])
                if holder is not None:
                    where = owner if len(loc) == 1 else _fmt_path(loc[:-1])
                    self.add(base + loc, unknown_field_message(str(loc[-1]), list(holder.model_fields), where))
                    continue
            self.add(base + loc, explain(err))


def unknown_field_message(key: str, fields: list[str], owner: str) -> str:
    """The one message for a misspelled field, whatever section it is in: what refused it, the fields it
    takes, and the closest of them (a user who typed ``scrpt`` needs ``script``, not a schema to read)."""
    return f"unknown field for {owner}; its fields: {', '.join(fields) or 'none'}.{suggest(key, fields)}"


def model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that holds the field at ``loc`` inside ``model`` (through optional, list, dict and union
    fields), or None where the location does not lead to one."""
    candidates: list[Any] = [model]
    for part in loc:
        candidates = [t for c in candidates for t in _inside(c, part)]
    models = [m for c in candidates for m in _members(c) if isinstance(m, type) and issubclass(m, BaseModel)]
    return models[0] if models else None


def _members(tp: Any) -> list[Any]:
    """The types an annotation may hold: a union's members, an Annotated's type, or itself."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _members(args[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in args for m in _members(a)]
    return [tp]


def _inside(tp: Any, part: Any) -> list[Any]:
    """What a location step ``part`` reaches from the annotation ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _inside(args[0], part)
    if origin in (typing.Union, types.UnionType):
        # pydantic names the union member it tried in the location (``ModelName``), unless it is X | None.
        tagged = [a for a in args if getattr(a, "__name__", None) == part]
        return tagged or [t for a in args for t in _inside(a, part)]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(part) if isinstance(part, str) else None
        return [field.annotation] if field is not None else []
    if origin in (list, tuple, set, frozenset) and isinstance(part, int) and args:
        return [args[0]]
    if origin is dict and len(args) == 2:
        return [args[1]]
    return []


def explain(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    msg = err.get("msg", "invalid")
    if kind == "extra_forbidden":  # where no model is found for it (not expected): still a way out
        return "unknown field; remove it or check its spelling (see 'chaos schema')"
    if kind == "missing":
        return "required field is missing"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    inp = err.get("input")
    if kind not in ("missing",) and isinstance(inp, (str, int, float, bool)) and len(repr(inp)) < 60:
        return f"{msg} (got {inp!r})"
    return msg
