"""Registries of faults, checks, triggers and targets: built-ins by subclassing, third parties by entry points."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from importlib.metadata import entry_points
from typing import Any, ClassVar, Generic, TypeVar

from chaos.errors import HarnessError

T = TypeVar("T")


def suggest(word: str, known: list[str]) -> str:
    """``"Did you mean 'kill-rank'?"`` or ``""``."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


class Registry(Generic[T]):
    """Kind name -> class. Built-ins live in ``package``; others come from entry-point ``group``."""

    def __init__(self, what: str, package: str, group: str) -> None:
        self.what = what
        self.package = package
        self.group = group
        self._items: dict[str, type[T]] = {}
        self._loaded = False

    def register(self, kind: str, cls: type[T]) -> None:
        existing = self._items.get(kind)
        if existing is not None and existing is not cls:
            raise HarnessError(
                f"two {self.what}s are named '{kind}': {existing.__module__}.{existing.__qualname__} "
                f"and {cls.__module__}.{cls.__qualname__}; rename one of them"
            )
        self._items[kind] = cls

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        pkg = importlib.import_module(self.package)
        for mod in pkgutil.iter_modules(pkg.__path__):
            if not mod.name.startswith("_"):
                importlib.import_module(f"{self.package}.{mod.name}")
        for ep in entry_points(group=self.group):
            try:
                cls = ep.load()
            except Exception as exc:  # a broken plugin must not take the harness down with it
                raise HarnessError(
                    f"the {self.what} plugin '{ep.name}' ({ep.value}) failed to import: {exc}; "
                    f"fix or uninstall the package that provides it"
                ) from exc
            self.register(ep.name, cls)

    def kinds(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def items(self) -> list[tuple[str, type[T]]]:
        self._load()
        return sorted(self._items.items())

    def get(self, kind: str) -> type[T] | None:
        self._load()
        return self._items.get(kind)

    def unknown_message(self, kind: object) -> str:
        known = self.kinds()
        return f"unknown {self.what} '{kind}'; known: {', '.join(known)}.{suggest(str(kind), known)}"


FAULTS: Registry = Registry("fault", "chaos.faults", "chaos.faults")
CHECKS: Registry = Registry("check", "chaos.checks", "chaos.checks")
TRIGGERS: Registry = Registry("trigger", "chaos.triggers", "chaos.triggers")
TARGETS: Registry = Registry("target", "chaos.targets", "chaos.targets")


class Plugin:
    """The skeleton every fault, check, trigger and target shares: a ``kind`` name, and registration in its
    base's registry when a subclass names one (``class KillRank(Fault, kind="kill-rank")``). Each base sets
    ``registry``; its settings class (``Config``, a chaos.spec.configs.StrictConfig) is the base's own."""

    kind: ClassVar[str] = ""
    registry: ClassVar[Registry]

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind:
            cls.kind = kind
            cls.registry.register(kind, cls)
