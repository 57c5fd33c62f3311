"""trainkit.startup: the collector is off from before ``import torch`` until the model is wrapped.

Each case runs in its own interpreter: the collector's state (and ``gc.freeze``) is process-wide,
and the pytest worker's must not change.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WORKLOADS = ROOT / "workloads"
SCRIPTS = sorted(p for p in WORKLOADS.glob("*.py") if p.name != "userloop.py")
HEAVY = ("torch", "lightning", "transformers", "accelerate", "trainkit.config", "trainkit.trainer",
         "trainkit.fsdp", "chaos", "userloop")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=WORKLOADS, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_pause_then_resume_freezes_start_up_and_collects_again() -> None:
    assert _run("""
        import gc
        from trainkit import startup
        startup.pause()
        paused = gc.isenabled()
        made = [[] for _ in range(1000)]
        startup.resume()
        print(paused, gc.isenabled(), gc.get_freeze_count() >= 1000)
    """) == "False True True"


def test_the_pause_can_be_switched_off_for_a_side_by_side_measurement(monkeypatch) -> None:
    monkeypatch.setenv("TRAINKIT_GC_PAUSE", "0")
    assert _run("""
        import gc
        from trainkit import startup
        startup.pause()
        paused = not gc.isenabled()
        startup.resume()
        print(paused, gc.isenabled(), gc.get_freeze_count())
    """) == "False True 0"


def test_resume_without_pause_leaves_the_collector_alone() -> None:
    # A script that never paused (or a test importing trainkit) keeps its collector as it was.
    assert _run("""
        import gc
        from trainkit import startup
        startup.resume()
        print(gc.isenabled(), gc.get_freeze_count())
    """) == "True 0"


def test_a_collector_turned_off_before_pause_stays_off() -> None:
    # The script's own choice (gc.disable for the whole run, a manual-GC loop) is not undone by resume.
    assert _run("""
        import gc
        gc.disable()
        from trainkit import startup
        startup.pause()
        startup.resume()
        print(gc.isenabled(), gc.get_freeze_count())
    """) == "False 0"


def _module_imports(tree: ast.Module) -> list[tuple[int, str]]:
    names: list[tuple[int, str]] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append((node.lineno, node.module))
    return names


def _calls(tree: ast.AST, name: str) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == name and isinstance(n.func.value, ast.Name) and n.func.value.id == "startup"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_reference_workload_pauses_before_torch_and_resumes(script: Path) -> None:
    tree = ast.parse(script.read_text())
    pauses = _calls(tree, "pause")
    assert len(pauses) == 1, f"{script.name}: call startup.pause() once, before import torch"
    heavy = [(line, name) for line, name in _module_imports(tree)
             if name.split(".")[0] in HEAVY or name in HEAVY]
    assert heavy and all(line > pauses[0] for line, _ in heavy), \
        f"{script.name}: {[n for line, n in heavy if line < pauses[0]]} imported before startup.pause()"
    # ddp.py and fsdp.py resume inside Trainer.run; the framework scripts once their model is wrapped.
    resumed_by_trainer = any(name.startswith("trainkit.trainer") or name.startswith("trainkit.fsdp")
                             for _, name in heavy)
    assert resumed_by_trainer or _calls(tree, "resume"), f"{script.name}: never calls startup.resume()"
