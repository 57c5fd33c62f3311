"""The workload's Python interpreter: the harness's own, or ``workload.python`` (the job's virtual environment,
e.g. a stack pinned at another version than the harness's), found, checked before launch, and asked what it
computes with (its Python and every distribution: the golden cache key is the workload's, not the harness's)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from chaos.errors import CapabilityError
from chaos.spec.workload import resolve_path

TARGETS_WITH_IMAGES = ("docker", "kubernetes")
"""Targets whose ranks run in an image: their interpreter is the image's (``target.python``), not a host path."""


def find(value: str, source: Path) -> Path | None:
    """``workload.python`` as a path, found as a script's is, but not resolved through symlinks (a virtual
    environment's ``bin/python`` is a link to the base interpreter)."""
    return resolve_path(value, source, follow_links=False)


def workload_python(experiment) -> str:
    """The interpreter that runs the workload's launcher and ranks: ``workload.python`` where given (see check),
    else the harness's own."""
    value = experiment.workload.python
    if value is None:
        return sys.executable
    found = find(value, experiment.source)
    return str(found) if found is not None else value


def activation(experiment, run_dir: Path, pythonpath: str | None) -> dict[str, str]:
    """The variables that make the workload's own environment the one its processes use, as activating it would:
    its bin/ first on PATH (a ``command``'s torchrun, accelerate, python), VIRTUAL_ENV, and on PYTHONPATH only the
    chaos package (for chaos.sdk), never the folder that holds it: for an installed harness that folder is the
    harness's own site-packages, whose torch and stack would shadow the environment's. {} without workload.python."""
    if experiment.workload.python is None:
        return {}
    python = Path(workload_python(experiment))
    only = run_dir.resolve() / "chaos-package"
    only.mkdir(parents=True, exist_ok=True)
    link = only / "chaos"
    if not link.is_symlink():
        link.symlink_to(Path(__file__).resolve().parent.parent)  # this package's folder, chaos/
    env = {"PATH": os.pathsep.join([str(python.parent), os.environ.get("PATH", os.defpath)]),
           "PYTHONPATH": os.pathsep.join(p for p in [str(only), pythonpath or ""] if p)}
    if (python.parent.parent / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(python.parent.parent)
    return env


def check(experiment) -> None:
    """Raise CapabilityError, before launch, when ``workload.python`` is not a runnable interpreter with torch."""
    value = experiment.workload.python
    if value is None:
        return
    found = find(value, experiment.source)
    if found is None or not found.is_file() or not os.access(found, os.X_OK):
        where = "" if Path(value).is_absolute() else " (looked for relative to the experiment file's folder and above)"
        raise CapabilityError(f"workload.python {value}: no such interpreter{where}; create the environment it names "
                              f"(python3 -m venv <dir> && <dir>/bin/pip install torch==2.13.0 ...), or run "
                              f"scripts/setup.sh for the environments this project's experiments name")
    missing = _missing(str(found), ("torch",))
    if missing:
        raise CapabilityError(f"workload.python {value}: {found} cannot import {', '.join(missing)}; install it "
                              f"there ({found} -m pip install torch==2.13.0)")
    command = experiment.workload.command
    program = command[0] if command else ""
    if program and os.sep not in program and not (found.parent / program).exists():
        # Not in the environment: the PATH's, which may be another environment's (the harness's own, activated).
        other = shutil.which(program)
        if other is not None and (Path(other).parent.parent / "pyvenv.cfg").is_file():
            raise CapabilityError(f"workload.command runs {program}, which {found.parent} does not have: it would be "
                                  f"{other}, of another virtual environment, with that environment's packages; "
                                  f"install it in the workload's ({found} -m pip install ...) or name its path")


def missing_modules(experiment, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` the workload's interpreter cannot find (without importing them)."""
    if experiment.workload.python is None:  # the harness's own: asked here, no process started
        return [m for m in modules if not _found_here(m)]
    return _missing(workload_python(experiment), modules)


def _found_here(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its package is missing
        return False


@functools.lru_cache(maxsize=32)
def _missing(python: str, modules: tuple[str, ...]) -> list[str]:
    code = ("import importlib.util, json, sys\n"
            "def found(m):\n"
            "    try:\n"
            "        return importlib.util.find_spec(m) is not None\n"
            "    except ImportError:\n"
            "        return False\n"
            "print(json.dumps([m for m in sys.argv[1:] if not found(m)]))")
    return _ask(python, code, list(modules))


def environment(python: str) -> list[str]:
    """What ``python`` computes with, for the golden cache key: its own version and every distribution it sees,
    name==version, in its path's order (the first of a name is the one imported). Not cached: an environment
    upgraded between two runs of one process is another environment."""
    code = ("import importlib.metadata as m, json, sys\n"
            "seen = []\n"
            "for d in m.distributions():\n"
            "    name = (d.metadata['Name'] or '').lower()\n"
            "    if name and name not in [s.split('==')[0] for s in seen]:\n"
            "        seen.append(name + '==' + (d.version or ''))\n"
            "print(json.dumps(['python==' + sys.version.split()[0]] + sorted(seen)))")
    return _ask(python, code, [])


@functools.lru_cache(maxsize=32)
def providers(python: str, modules: tuple[str, ...]) -> dict[str, list[str]]:
    """Each of ``modules`` -> [distribution, version] of the distribution ``python`` imports it from: the first on
    its path (a layered environment may see two distributions of one module, e.g. torchft and torchft-nightly)."""
    code = ("import importlib.metadata as m, json, sys\n"
            "names = m.packages_distributions()\n"
            "out = {}\n"
            "for mod in sys.argv[1:]:\n"
            "    for dist in names.get(mod, [])[:1]:\n"
            "        out[mod] = [dist, m.version(dist)]\n"
            "print(json.dumps(out))")
    return _ask(python, code, list(modules))


def _ask(python: str, code: str, args: list[str]):
    try:
        # As the ranks run: the harness's PYTHONPATH is theirs too (after the chaos package), not isolated.
        res = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CapabilityError(f"workload.python {python} does not run: {exc}") from None
    if res.returncode != 0:
        raise CapabilityError(f"workload.python {python} does not run (exit {res.returncode}): "
                              f"{res.stderr.strip()[-300:]}")
    return json.loads(res.stdout)
