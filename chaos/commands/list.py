"""``chaos list faults|checks|triggers|targets|mixes``: every kind with its fields, from the same typed configs."""

from __future__ import annotations

import argparse
from typing import Any, get_origin

from pydantic import BaseModel
from rich.console import Console

from chaos.spec.mixes import MIXES, play, play_cause
from chaos.registry import CHECKS, FAULTS, TARGETS, TRIGGERS
from chaos.report.console import make_console

_REGISTRIES = {"faults": FAULTS, "checks": CHECKS, "triggers": TRIGGERS, "targets": TARGETS}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list faults, checks, triggers or targets with their fields, or game-day mixes")
    p.add_argument("what", choices=sorted([*_REGISTRIES, "mixes"]))
    p.set_defaults(func=run)


def _config_of(cls: Any) -> type[BaseModel]:
    return getattr(cls, "Config", None) or getattr(cls, "Params")


def _type_name(annotation: Any) -> str:
    text = str(annotation) if get_origin(annotation) is not None else getattr(annotation, "__name__", str(annotation))
    return text.replace("typing.", "").replace("NoneType", "None")


def describe(what: str) -> list[tuple[str, str, list[tuple[str, str, str, str]]]]:
    """(kind, summary, [(field, type, default, doc)]) for every registered kind."""
    out = []
    inherited = {"trigger", "duration_s", "name"} if what == "faults" else set()
    for kind, cls in _REGISTRIES[what].items():
        doc = (cls.__doc__ or "").strip().splitlines()
        fields = []
        for name, info in _config_of(cls).model_fields.items():
            if name in inherited:
                continue
            default = "required" if info.is_required() else repr(
                info.default_factory() if info.default_factory else info.default)
            fields.append((name, _type_name(info.annotation), default, info.description or ""))
        out.append((kind, doc[0] if doc else "", fields))
    return out


def _mixes(console: Console) -> int:
    for mix in MIXES.values():
        console.print(f"[bold]{mix.name}[/]  {mix.total} interruptions on {mix.gpus} GPUs in {mix.span_days:g} days")
        console.print(f"    [dim]{mix.source}[/]")
        for category, count in sorted(mix.by_category().items(), key=lambda kv: -kv[1]):
            causes = ", ".join(f"{c.name} {c.count}" for c in mix.causes if c.category == category)
            console.print(f"    [cyan]{category}[/] {count}: {causes}")
            for target in ("local", "netns", "slurm"):
                p = play(category, target)
                fields = " ".join(f"{k}={v}" for k, v in p.fault.items())
                console.print(f"        [dim]{target}: {fields}: {p.why}[/]")
            for cause in (c for c in mix.causes if c.category == category):
                own = play_cause(cause.name, category, "local")
                if own != play(category, "local"):  # a cause played by itself, on every target
                    fields = " ".join(f"{k}={v}" for k, v in own.fault.items())
                    console.print(f"        [dim]{cause.name} (every target): {fields}: {own.why}[/]")
    return 0


def run(args: argparse.Namespace) -> int:
    console = make_console()
    if args.what == "mixes":
        return _mixes(console)
    for kind, summary, fields in describe(args.what):
        console.print(f"[bold]{kind}[/]  {summary}")
        for name, typ, default, doc in fields:
            console.print(f"    [cyan]{name}[/]: {typ} = {default}")
            if doc:
                console.print(f"        [dim]{doc}[/]")
    if args.what == "faults":
        console.print("\nEvery fault also takes: trigger (when), duration_s (revert after), name (label).")
    if args.what == "triggers":
        console.print("\nCombine with any: [...] / all: [...]; every trigger takes delay_s and times.")
    return 0
