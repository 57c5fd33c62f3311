"""The harness's own records, typed (chaos.evidence.harness_records): each class reads what the harness writes,
a record that lacks a field reads None, and only what the harness wrote itself is the harness's."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import chaos
from chaos.evidence import harness_records as hr
from chaos.evidence.events import History
from chaos.evidence.records import HARNESS_KINDS, KINDS, ProtocolError, Record, parse, record
from chaos.runtime.context import HarnessLog

CLASSES = [c for c in vars(hr).values() if inspect.isclass(c) and issubclass(c, Record) and c.__module__ == hr.__name__]


def fields(cls: type[Record]) -> dict[str, hr.Field[Any]]:
    return {name: f for k in reversed(cls.__mro__) for name, f in vars(k).items() if isinstance(f, hr.Field)}


def test_every_class_is_a_harness_kind_and_what_record_makes_of_it() -> None:
    assert CLASSES
    for cls in CLASSES:
        assert cls.KIND in HARNESS_KINDS, cls
        assert KINDS[cls.KIND] is cls
        assert type(record({"ev": cls.KIND, "t": 1.0, "source": "harness"})) is cls
        assert cls.__doc__ and fields(cls), f"{cls.__name__}: say what the harness saw, and what it wrote"


def test_a_second_class_for_one_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="two classes"):
        type("Impostor", (Record,), {"__slots__": (), "KIND": "kube_container"})
    assert KINDS["kube_container"] is hr.KubeContainer


def _logged() -> dict[str, set[str]]:
    """Kind -> the field names chaos/ passes to its log calls (``run.log("kind", a=..., b=...)``), with what the
    calls that spread a mapping (``**state``) put there, read from the functions that make it."""
    out: dict[str, set[str]] = {}
    for path in Path(chaos.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) \
                    and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in ("log", "_log") \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                out.setdefault(node.args[0].value, set()).update(
                    name for k in node.keywords for name in ([k.arg] if k.arg else _literal_keys(k.value)))
    return out


def _literal_keys(node: ast.expr) -> list[str]:
    """The keys of a mapping spread as written in place: ``**({"independent": True} if independent else {})``."""
    if isinstance(node, ast.IfExp):
        return _literal_keys(node.body) + _literal_keys(node.orelse)
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def _spread(tmp_path: Path) -> dict[str, set[str]]:
    from chaos.evidence.pointer import judge_target, order_of
    from chaos.evidence.witness import look
    from chaos.kube.jobs import job_state
    from chaos.runtime.slowfs import Pacer
    from chaos.slurm.control import JobState

    (tmp_path / "ops.jsonl").write_text("")
    report = SimpleNamespace(ok=True, kind="torch", all_problems=lambda: [])
    verified = look({"path": str(tmp_path), "step": 1, "seen": "ckpt_commit", "attempt": "0.0", "t_event": 1.0},
                    verify_fn=lambda path, load: report)
    return {"slurm_job": set(JobState(job_id="1", state="RUNNING").summary()),
            "kube_job": set(job_state(SimpleNamespace(active=1, failed=0, succeeded=0, conditions=[]))),
            "ckpt_pointer": set(judge_target(tmp_path / "gone")),
            "pointer_order": set(order_of(tmp_path / "ops.jsonl", "latest", tmp_path)) | {"error"},
            "slowfs": set(Pacer(SimpleNamespace(), None).stats),
            "ckpt_verify": set(verified) | {"values"}}  # a scan's numbers, only when asked


def test_each_field_is_one_the_harness_writes(tmp_path: Path) -> None:
    """A field name the harness never writes would read None for ever: a check would see no evidence where there was."""
    logged, spread = _logged(), _spread(tmp_path)
    for cls in CLASSES:
        written = logged.get(cls.KIND, set()) | spread.get(cls.KIND, set())
        names = {f.key for f in fields(cls).values()}
        assert names <= written, f"{cls.__name__} reads {sorted(names - written)}, which chaos/ never logs"


def test_the_attributes_read_what_the_harness_log_wrote() -> None:
    log = HarnessLog(None)
    log("kube_container", node="node1", pod="j-n1-a", container="abc", pid=42, restart_count=2, pod_uid="u1",
        k8s_node="vm")
    log("worker_spawn", worker_pid=7, started=12.5, rank=0, node="node0", attempt="0.1", generation=3, launch=None)
    log("launch", launch=1, target="local", nodes=1, experiment="e", nproc_per_node=2, visible_devices=[0, 2],
        excluded=[1], reason="devices excluded by the health monitor")
    log("xid_write", fault="xid#0", index=0, code=79, device="0000:c1:00", bus_id="0000:c1:00", sink="file", n=1,
        line="NVRM: Xid")
    log("ckpt_pointer", pointer="latest", target="step_10", path="/c/step_10", step=10, look_s=0.01, lag_s=None,
        whole=False, problems=["short"], hashed=True)
    log("ckpt_verify", path="/c/step_10", step=10, seen="ckpt_load", attempt="0.1", t_event=3.0, ok=False,
        values={"tensors": 1})
    h = History([record(r) for r in log.drain()])
    [c] = h.harness(hr.KubeContainer)
    assert (c.node, c.pod, c.container, c.pid, c.restart_count, c.pod_uid, c.k8s_node) == \
        ("node1", "j-n1-a", "abc", 42, 2, "u1", "vm")
    [s] = h.harness(hr.WorkerSpawn)
    assert (s.worker_pid, s.started, s.node, s.generation, s.launch, s.rank, s.attempt) == (7, 12.5, "node0", 3, None,
                                                                                            0, "0.1")
    [launch] = h.harness(hr.Launch)
    assert (launch.launch, launch.visible_devices, launch.excluded, launch.nproc_per_node) == (1, [0, 2], [1], 2)
    [x] = h.harness(hr.XidWrite)
    assert (x.index, x.code, x.device, x.n) == (0, 79, "0000:c1:00", 1)
    [m] = h.harness(hr.CkptPointer)
    assert (m.whole, m.hashed, m.lag_s, m.problems, m.target, m.step) == (False, True, None, ["short"], "step_10", 10)
    [v] = h.harness(hr.CkptVerify)
    assert (v.ok, v.seen, v.t_event, v.scanned) == (False, "ckpt_load", 3.0, {"tensors": 1})
    assert callable(v.values)  # still the mapping's own method: the field is ``scanned``


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.KIND)
def test_a_missing_field_reads_none_and_so_does_a_stray_type(cls: type[Record]) -> None:
    bare = record({"ev": cls.KIND, "source": "harness", "t": 1.0})
    assert {name: getattr(bare, name) for name in fields(cls)} == dict.fromkeys(fields(cls))
    # A bool is no count and no time, and a string no number: the field reads None, never a stand-in.
    stray = record({"ev": cls.KIND, "source": "harness", "t": 1.0,
                    **{f.key: (True if bool not in f.types else "yes") for f in fields(cls).values()}})
    assert all(getattr(stray, name) is None for name in fields(cls))


def test_a_relabelled_record_keeps_its_class_and_attributes() -> None:
    spawn = record({"ev": "worker_spawn", "source": "harness", "t": 1.0, "attempt": "0.0", "worker_pid": 7,
                    "node": "n0", "generation": 0})
    moved = spawn.relabeled("0.1")
    assert isinstance(moved, hr.WorkerSpawn) and moved.worker_pid == 7 and moved.attempt == "0.1"


@pytest.mark.parametrize("line", [
    {"ev": "kube_container", "t": 1.0, "attempt": "0.0", "rank": 0, "pod": "p", "pod_uid": "u", "restart_count": 0},
    {"ev": "kube_container", "t": 1.0, "attempt": "0.0", "rank": 0, "source": "harness", "pod": "p"},
    {"ev": "health", "t": 1.0, "attempt": "0.0", "rank": 0, "source": "harness", "code": 79},
])
def test_a_ranks_line_claiming_a_harness_kind_or_source_is_never_the_harnesss(line: dict[str, Any],
                                                                              tmp_path: Path) -> None:
    with pytest.raises(ProtocolError):
        parse(line)
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank0.jsonl").write_text(json.dumps(line) + "\n")
    (tmp_path / "harness.jsonl").write_text(json.dumps({"ev": "launch", "t": 0.5, "source": "harness", "launch": 0})
                                            + "\n")
    h = History.from_run_dir(tmp_path)
    assert not h.harness(hr.KubeContainer) and not [r for r in h.records if r.ev == line["ev"]]
    assert len(h.malformed) == 1 and "rank0.jsonl" in h.malformed[0]
    [launch] = h.harness(hr.Launch)
    assert launch.harness and launch.launch == 0


def test_only_the_harnesss_own_records_of_a_kind_are_given_to_a_check() -> None:
    # A history built by hand may hold a harness kind without the harness's mark: a check never reads it as evidence.
    h = History([{"ev": "kube_container", "t": 1.0, "pod": "forged"},
                 {"ev": "kube_container", "t": 2.0, "source": "harness", "pod": "seen"}])
    assert [r.pod for r in h.harness(hr.KubeContainer)] == ["seen"]
    assert [r.pod for r in h.of("kube_container")] == ["forged", "seen"]
    assert [r.harness for r in h.records] == [False, True]
