"""ci/bench/bytecode.py: the compiled copy has bytecode for every module and the source copy none at all."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("bytecode", ROOT / "ci" / "bench" / "bytecode.py")
bytecode = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bytecode)


def test_the_two_copies_differ_only_in_bytecode(tmp_path: Path) -> None:
    compiled = bytecode.tree(tmp_path / "c", compiled=True, parts=("workloads",))
    source = bytecode.tree(tmp_path / "s", compiled=False, parts=("workloads",))
    assert not list(source.rglob("*.pyc")), "the source copy must carry no bytecode (not even the checkout's own)"
    pycs = {p.parent.parent / (p.name.split(".")[0] + ".py") for p in compiled.rglob("__pycache__/*.pyc")}
    modules = set(compiled.joinpath("workloads").rglob("*.py"))
    assert modules and modules <= pycs, f"not compiled: {sorted(str(m) for m in modules - pycs)[:5]}"
    assert sorted(p.relative_to(source) for p in source.rglob("*.py")) == \
        sorted(p.relative_to(compiled) for p in compiled.rglob("*.py"))
