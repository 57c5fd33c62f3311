"""The reference pre-flight gate's probes without a process group: the kernel log, NVML, storage, the baseline."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chaos.health.nvml import init_sim_state, inject_sim_xid
from chaos.health.node_probes import dcgm_probe, kernel_log_probe, nvml_probe, storage_probe
from chaos.health.preflight import Measured, judge_measured, read_baseline
from chaos.health.xidline import bus_id_for, format_xid_line

LIMITS = dict(latency_factor=4.0, bandwidth_fraction=0.25, straggler_ratio=1.6, compute_factor=3.0)
BASE = Measured(2, "gloo", latency_s=0.001, busbw_gbps=1.0, compute_s=[0.2, 0.2], storage_mbps=100.0)


def log(tmp_path: Path, *codes: int) -> str:
    path = tmp_path / "kern.log"
    path.write_text("".join(f"[  1.0] {format_xid_line(c, bus_id_for(0))}\n" for c in codes) + "usb 1-1: new device\n")
    return f"file:{path}"


@pytest.mark.parametrize("code", [79, 48, 63, 92])
def test_a_hardware_or_degrading_xid_fails(tmp_path: Path, code: int):
    probe = kernel_log_probe([log(tmp_path, code)])
    assert not probe.ok and f"XID {code}" in probe.detail


def test_an_application_xid_is_noted_not_failed(tmp_path: Path):
    probe = kernel_log_probe([log(tmp_path, 13)])
    assert probe.ok and "noted XID 13" in probe.detail


def test_a_clean_log_passes_and_an_unreadable_one_is_skipped_not_passed(tmp_path: Path):
    assert kernel_log_probe([log(tmp_path)]).ok
    (tmp_path / "d").mkdir()
    probe = kernel_log_probe([f"file:{tmp_path / 'd'}"])
    assert probe.skipped and probe.detail.startswith("skipped")


def test_simulated_nvml_events_and_ecc_fail(tmp_path: Path):
    state = str(tmp_path / "nvml.json")
    init_sim_state(state, 2)
    assert nvml_probe([f"nvml:{state}"]).ok and kernel_log_probe([f"nvml:{state}"]).ok
    inject_sim_xid(state, 1, 48)
    assert "uncorrected ECC" in nvml_probe([f"nvml:{state}"]).detail
    assert not kernel_log_probe([f"nvml:{state}"]).ok


def test_no_nvml_is_a_skip_that_says_so():
    probe = nvml_probe([])
    if not probe.skipped:
        pytest.skip("this machine has NVML: the probe answered for real")
    assert probe.ok and "no NVML" in probe.detail


def test_storage_round_trip_and_its_failures(tmp_path: Path):
    probe = storage_probe(str(tmp_path), 0.1, "t")
    assert probe.ok and probe.figure is not None and probe.figure > 0
    assert os.listdir(tmp_path) == []  # nothing left behind
    (tmp_path / "file").write_text("")
    probe = storage_probe(str(tmp_path / "file" / "ckpt"), 0.1, "t")
    assert not probe.ok and ("ENOTDIR" in probe.detail or "EEXIST" in probe.detail)


@pytest.mark.parametrize("now, probe, words", [
    (Measured(2, "gloo", 0.005, 1.0, [0.2, 0.2], storage_mbps=100.0), "allreduce", "latency 5.00 ms, over 4x"),
    (Measured(2, "gloo", 0.001, 0.2, [0.2, 0.2], storage_mbps=100.0), "allreduce", "under 0.25 of the baseline"),
    (Measured(2, "gloo", 0.001, 1.0, [0.2, 0.4], storage_mbps=100.0), "compute", "rank 1 is a straggler"),
    (Measured(2, "gloo", 0.001, 1.0, [0.7, 0.7], storage_mbps=100.0), "compute", "over 3x the baseline"),
    (Measured(4, "gloo", 0.001, 1.0, [0.2] * 4), "allreduce", "record one for this world"),
    (Measured(2, "gloo", 0.001, 1.0, [0.2, 0.2], storage_mbps=5.0), "storage_speed", "under 0.1 of the baseline's 100.0"),
])
def test_each_degradation_fails_its_probe(now, probe, words):
    failed = [p for p in judge_measured(now, BASE, **LIMITS) if not p.ok]
    assert failed and failed[0].name == probe and words in failed[0].detail


def test_the_healthy_figures_pass_and_no_baseline_still_catches_a_straggler():
    healthy = judge_measured(Measured(2, "gloo", 0.0015, 0.8, [0.2, 0.25], storage_mbps=60.0), BASE, **LIMITS)
    assert all(p.ok for p in healthy) and [p.name for p in healthy] == ["storage_speed", "allreduce", "compute"]
    # A baseline from before the storage figure existed judges no speed rather than failing it.
    old = Measured(2, "gloo", 0.001, 1.0, [0.2, 0.2])
    assert [p.name for p in judge_measured(Measured(2, "gloo", 0.001, 1.0, [0.2, 0.2], 1.0), old, **LIMITS)] == \
        ["allreduce", "compute"]
    probes = judge_measured(Measured(2, "gloo", 1.0, 0.001, [0.2, 0.5]), None, **LIMITS)
    assert probes[0].ok and "no baseline" in probes[0].detail and not probes[1].ok


def test_a_missing_baseline_says_how_to_record_one(tmp_path: Path):
    base, why = read_baseline(str(tmp_path / "none.json"))
    assert base is None and "--record-baseline" in why
    (tmp_path / "b.json").write_text(json.dumps({"world_size": 2}))
    assert "unreadable baseline" in read_baseline(str(tmp_path / "b.json"))[1]


def test_dcgm_diag_fails_the_gate_where_it_fails(tmp_path: Path, monkeypatch):
    dcgmi = tmp_path / "dcgmi"
    dcgmi.write_text("#!/bin/sh\necho '| Memory | Fail - GPU 0: row remap pending |'\nexit 226\n")
    dcgmi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    probe = dcgm_probe(1, 10)
    assert not probe.ok and "exited 226" in probe.detail and "row remap pending" in probe.detail
    dcgmi.write_text("#!/bin/sh\necho all passed\n")
    assert dcgm_probe(1, 10).ok
    assert dcgm_probe(0, 10).skipped
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert dcgm_probe(1, 10).skipped
