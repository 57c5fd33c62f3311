"""nvrx-fault: the harness decides when and on which rank, NVIDIA Resiliency Extension's own injector acts.

The rank side is the real in-step runtime on a real model; NVRx's dispatcher is the real one (its cooperative
WORKLOAD_EXC kind raises InjectedException where the loop asks), or, to see what it was handed for the kinds
that end or interrupt the process, a recorder registered for that kind through NVRx's own register_fault.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from pydantic import ValidationError
from test_instep_rank import Job, instep_events

from chaos.errors import CapabilityError
from chaos.faults.nvrx_fault import NvrxFault, NvrxFaultConfig
from chaos.instep.command import applied, write
from chaos.runtime.context import RunContext
from instep_runs import run_with

nvrx = pytest.importorskip("nvidia_resiliency_ext.inprocess.tools.inject_fault",
                           reason="the nvrx extra is not installed: pip install -e '.[nvrx]' (scripts/setup.sh does)")


@pytest.fixture
def job(tmp_path: Path, events: Path) -> Iterator[Job]:
    (tmp_path / "instep").mkdir()
    j = Job(tmp_path / "instep", rank=1)
    yield j
    j.close()


def _arm(tmp_path: Path, **config: Any) -> None:
    write(str(tmp_path / "instep"), NvrxFault(NvrxFaultConfig(rank=1, **config), 0).command())


def test_the_workload_exception_is_raised_by_nvrx_where_the_loop_asks_for_it(job: Job, events: Path,
                                                                             tmp_path: Path) -> None:
    nvrx.clear_workload_exception()
    job.train(2)
    _arm(tmp_path, fault="WORKLOAD_EXC", delay_s=0.0)
    job.runtime.poll()
    deadline = time.monotonic() + 10
    with pytest.raises(nvrx.InjectedException):
        while time.monotonic() < deadline:  # NVRx's own thread sets the sentinel after its delay
            nvrx.maybe_raise_workload_exception()
            time.sleep(0.005)
    [landed] = instep_events(events)
    assert landed["nvrx_fault"] == "WORKLOAD_EXC" and landed["where"] == "nvrx" and landed["step"] == 3
    assert applied(str(tmp_path / "instep"), 0, 1) == 1 and not job.runtime.armed


def test_each_kind_reaches_nvrx_once_with_its_delay_after_the_evidence(job: Job, events: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[tuple[str, float, int]] = []
    registry = dict(nvrx._registered_faults)
    registry[nvrx.Fault.ASYNC_EXC] = lambda delay, callback: handed.append(
        ("ASYNC_EXC", delay, len(instep_events(events))))
    monkeypatch.setattr(nvrx, "_registered_faults", registry)
    _arm(tmp_path, fault="ASYNC_EXC", delay_s=2.0)
    job.runtime.poll()
    job.train(3)
    job.runtime.poll()
    # Once, with the delay asked, and only after the instep event was written: a SIGKILL leaves no chance after.
    assert handed == [("ASYNC_EXC", 2.0, 1)]


def test_another_ranks_fault_is_not_fired_here(job: Job, events: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[float] = []
    registry = dict(nvrx._registered_faults)
    registry[nvrx.Fault.SIGKILL] = lambda delay, callback: handed.append(delay)
    monkeypatch.setattr(nvrx, "_registered_faults", registry)
    write(str(tmp_path / "instep"), NvrxFault(NvrxFaultConfig(rank=0, fault="SIGKILL"), 0).command())
    job.runtime.poll()
    job.train(2)
    assert handed == [] and instep_events(events) == []


def _run(tmp_path: Path) -> RunContext:
    return run_with(tmp_path, "{kind: nvrx-fault, fault: ASYNC_EXC, rank: 1, trigger: {at_step: 5}}")


def test_without_nvrx_the_fault_is_refused_before_launch_saying_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nvidia_resiliency_ext" else real(name, *a))
    with pytest.raises(CapabilityError, match=r"not installed .*pip install -e '\.\[nvrx\]'"):
        NvrxFault(NvrxFaultConfig(rank=1), 0).check(_run(tmp_path))


@pytest.mark.parametrize("config", [{"fault": "GPU_ERROR"}, {"steps": 2}, {"delay_s": -1}])
def test_what_nvrx_cannot_do_here_is_a_config_error(config: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        NvrxFaultConfig(rank=1, **config)
