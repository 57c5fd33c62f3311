"""Host capability probes behind ``chaos doctor``: each says whether a feature works here and how to enable it.

A probe is a function registered with ``@probe``; every module in ``chaos.probes`` is imported, so a new
capability (NVML, DCGM, /dev/kmsg) is one new module there.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

from chaos.runtime.shell import Shell


@dataclass
class ProbeResult:
    ok: bool
    detail: str
    fix: str = ""
    """How to enable it when not ok (a command or a setting)."""


@dataclass
class Host:
    """What probes share: a shell, and a throwaway network namespace made on first use and removed after."""

    shell: Shell = field(default_factory=Shell)
    _netns: str | None = None

    def netns(self) -> str:
        if self._netns is None:
            name = f"chaos-doctor-{os.getpid()}"
            self.shell.run(["ip", "netns", "add", name])
            self._netns = name
            # veth, not dummy: some kernels lack the dummy module.
            self.shell.run(["ip", "-n", name, "link", "add", "chdoc0", "type", "veth", "peer", "name", "chdoc1"])
            self.shell.run(["ip", "-n", name, "link", "set", "chdoc0", "up"])
        return self._netns

    def close(self) -> None:
        if self._netns is not None:
            self.shell.run(["ip", "netns", "del", self._netns], check=False)
            self._netns = None


@dataclass
class Probe:
    name: str
    summary: str
    run: Callable[[Host], ProbeResult]
    needs: tuple[str, ...] = ()
    """Probes that must pass first (netem needs root and netns); a failed need skips this one."""


PROBES: dict[str, Probe] = {}


def probe(name: str, summary: str, needs: tuple[str, ...] = ()) -> Callable[[Callable[[Host], ProbeResult]], Callable[[Host], ProbeResult]]:
    """Register ``fn`` as the probe ``name`` (``summary``: what the harness uses it for)."""
    def register(fn: Callable[[Host], ProbeResult]) -> Callable[[Host], ProbeResult]:
        PROBES[name] = Probe(name, summary, fn, needs)
        return fn
    return register


def load_probes() -> dict[str, Probe]:
    import chaos.probes as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"chaos.probes.{mod.name}")
    return PROBES


def run_probes(only: list[str] | None = None, host: Host | None = None) -> list[tuple[Probe, ProbeResult]]:
    """Run the probes (in registration order), each guarded: one crash is a failed probe, not a crashed doctor."""
    probes = load_probes()
    host = host or Host()
    results: dict[str, ProbeResult] = {}
    out = []
    try:
        for name, p in probes.items():
            if only and name not in only:
                continue
            failed_need = next((n for n in p.needs if n in results and not results[n].ok), None)
            if failed_need:
                res = ProbeResult(False, f"not tried: needs {failed_need}", f"fix '{failed_need}' first")
            else:
                try:
                    res = p.run(host)
                except Exception as exc:  # a probe that breaks reports it and the rest still run
                    res = ProbeResult(False, f"probe failed: {type(exc).__name__}: {exc}")
            results[name] = res
            out.append((p, res))
    finally:
        host.close()
    return out
