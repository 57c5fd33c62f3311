"""Fuzzing the experiment loader: any input is an Experiment or an ExperimentError naming the problem; never a
traceback, never a hang (malformed YAML, wrong types, huge values, unknown keys, hostile paths, deep nesting,
YAML bombs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.errors import ExperimentError
from chaos.spec.experiment import Experiment
from chaos.spec.load import load_experiment
from chaos.registry import CHECKS, FAULTS, TRIGGERS

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "experiments" / "fuzz.yaml"  # never written: only where relative paths resolve from

FUZZ = settings(max_examples=150, deadline=5000, suppress_health_check=[HealthCheck.too_slow])

HOSTILE_PATHS = ["../../../../etc/passwd", "/etc/passwd", "/", "/etc", "/proc/self/mem", "~", "~root", "..",
                 "a\0b", "x" * 5000, "/" + "a/" * 3000, "ckpt/../../..", "\n", "", " ", "$(rm -rf /)",
                 "; rm -rf /", "/dev/zero", "C:\\Windows", "%s%s%n", "\u202e\u0000", "/tmp/" + "é" * 300]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30), st.sampled_from(HOSTILE_PATHS))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=20)


def _load(text: str) -> Experiment | None:
    """Load ``text``; any error must be an ExperimentError with at least one located, non-empty problem."""
    try:
        return load_experiment(SOURCE, text=text)
    except ExperimentError as exc:
        assert exc.problems and all(p.message for p in exc.problems)
        assert exc.exit_code == 2
        return None


def _dump(doc: Any) -> str:
    try:
        return yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        return yaml.safe_dump(repr(doc))


def _base(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": "fuzz", "workload": {"script": "workloads/ddp.py", "args": {"steps": 10}},
                           "faults": [{"kind": "kill-rank", "trigger": {"at_step": 3}}], "checks": ["completes"]}
    doc.update(over)
    return doc


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    _load(text)


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_as_yaml(data: bytes) -> None:
    _load(data.decode("utf-8", errors="surrogateescape").encode("utf-8", errors="replace").decode("utf-8"))


@FUZZ
@given(st.dictionaries(st.sampled_from(["name", "description", "workload", "target", "faults", "checks",
                                        "timeout_s", "seed", "unknown_key", "Name"]), values, max_size=8))
def test_top_level_fields_of_any_type(doc: dict) -> None:
    _load(_dump(doc))


@FUZZ
@given(st.dictionaries(st.sampled_from(["script", "command", "nproc_per_node", "max_restarts", "args", "env",
                                        "ckpt_dir", "join_timeout_s", "step_regex", "bogus"]), values, max_size=6))
def test_workload_fields_of_any_type(workload: dict) -> None:
    _load(_dump(_base(workload=workload)))


@FUZZ
@given(kind=st.sampled_from(FAULTS.kinds() + ["nope", "", "KILL-RANK"]),
       fields=st.dictionaries(st.text(max_size=15), values, max_size=5),
       trigger=values)
def test_every_fault_kind_with_any_fields_and_trigger(kind: str, fields: dict, trigger: Any) -> None:
    fault = {**fields, "kind": kind, "trigger": trigger}
    _load(_dump(_base(faults=[fault])))


@FUZZ
@given(kind=st.sampled_from(FAULTS.kinds()), data=st.data())
def test_every_fault_field_with_wrong_or_huge_values(kind: str, data: st.DataObject) -> None:
    names = list(FAULTS.get(kind).Config.model_fields)
    fields = data.draw(st.dictionaries(st.sampled_from(names), values, max_size=len(names)))
    fields.pop("trigger", None)
    _load(_dump(_base(faults=[{**fields, "kind": kind, "trigger": {"at_step": 3}}])))


@FUZZ
@given(trigger_kind=st.sampled_from(TRIGGERS.kinds() + ["any", "all"]), value=values,
       modifiers=st.dictionaries(st.sampled_from(["delay_s", "times"]), values, max_size=2))
def test_triggers_with_any_value(trigger_kind: str, value: Any, modifiers: dict) -> None:
    _load(_dump(_base(faults=[{"kind": "kill-rank", "trigger": {trigger_kind: value, **modifiers}}])))


@FUZZ
@given(check=st.sampled_from(CHECKS.kinds() + ["nope"]), value=values)
def test_checks_with_any_value(check: str, value: Any) -> None:
    _load(_dump(_base(checks=[{check: value}])))


@FUZZ
@given(path=st.one_of(st.sampled_from(HOSTILE_PATHS), st.text(max_size=200)),
       field=st.sampled_from(["script", "ckpt_dir", "step_regex"]))
def test_hostile_paths_are_refused_or_harmless(path: str, field: str) -> None:
    workload = {"script": "workloads/ddp.py", field: path}
    exp = _load(_dump(_base(workload=workload)))
    if exp is not None and field == "ckpt_dir":
        resolved = Path(path).expanduser().resolve()
        assert str(resolved) not in ("/", "/etc", "/proc", "/home", "/usr", "/tmp") and resolved != Path.home()


@pytest.mark.parametrize("path", ["/", "/etc", "/etc/passwd", "~", "/proc", "a\0b", "x" * 5000])
def test_dangerous_checkpoint_dirs_are_refused(path: str) -> None:
    with pytest.raises(ExperimentError, match="ckpt_dir"):
        load_experiment(SOURCE, text=_dump(_base(workload={"script": "workloads/ddp.py", "ckpt_dir": path})))


def test_a_symlink_to_a_system_dir_is_refused_as_checkpoint_dir(tmp_path: Path) -> None:
    (tmp_path / "innocent").symlink_to("/etc")
    with pytest.raises(ExperimentError, match="system or home directory"):
        load_experiment(SOURCE, text=_dump(_base(workload={"script": "workloads/ddp.py",
                                                           "ckpt_dir": str(tmp_path / "innocent")})))


@pytest.mark.parametrize("field, value", [("env", {"A\0": "1"}), ("env", {"A": "b\0c"}), ("args", {"x": "a\0"}),
                                          ("command", ["python", "t\0.py"])])
def test_nul_bytes_anywhere_in_the_workload_are_refused(field: str, value: Any) -> None:
    workload: dict[str, Any] = {"script": "workloads/ddp.py", field: value}
    if field == "command":
        workload = {"command": value}
    with pytest.raises(ExperimentError, match="NUL"):
        load_experiment(SOURCE, text=_dump(_base(workload=workload)))


@pytest.mark.parametrize("depth", [50, 500, 5000, 50000])
def test_deep_nesting(depth: int) -> None:
    for text in ["[" * depth + "]" * depth, "a: " + "{b: " * depth + "1" + "}" * depth,
                 "\n".join("  " * i + f"k{i}:" for i in range(min(depth, 3000))) + " 1"]:
        _load(text)


def _bomb(levels: int, width: int) -> str:
    lines = ['name: bomb', 'workload: {script: workloads/ddp.py}', 'l0: &l0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    lines.append(f"faults: [*l{levels}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels, width", [(9, 9), (20, 10), (40, 2), (3, 1000)])
def test_yaml_bombs_are_refused_quickly(levels: int, width: int) -> None:
    t0 = time.monotonic()
    with pytest.raises(ExperimentError, match="expands to more than"):
        load_experiment(SOURCE, text=_bomb(levels, width))
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("text", ["a: &a [*a]", "a: &a {b: *a}", "&x [1, [2, *x]]"])
def test_recursive_aliases_are_refused(text: str) -> None:
    with pytest.raises(ExperimentError, match="refers to itself"):
        load_experiment(SOURCE, text=text)


def test_a_small_alias_use_is_still_fine() -> None:
    text = ("name: aliased\nworkload: &w {script: workloads/ddp.py}\nfaults:\n"
            "  - &f {kind: kill-rank, trigger: {at_step: 3}}\n  - *f\n")
    assert len(load_experiment(SOURCE, text=text).faults) == 2


def test_huge_files_are_refused_without_parsing() -> None:
    with pytest.raises(ExperimentError, match="characters"):
        load_experiment(SOURCE, text="name: x\n" + "# pad\n" * 300_000)


@pytest.mark.parametrize("path", ["a\0b", "x" * 5000, "/nonexistent/dir/x.yaml", "/", "/proc/self/mem"])
def test_hostile_experiment_file_paths(path: str) -> None:
    with pytest.raises(ExperimentError):
        load_experiment(path)
