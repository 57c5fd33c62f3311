"""The xid fault: config, sinks (file, nvml; kmsg and dcgm refused without their opt-in / tool), repeats and revert."""

import json
import os
import shutil
import time

import pytest
from pydantic import ValidationError

from chaos.errors import CapabilityError
from chaos.faults.xid import XidConfig
from chaos.health.nvml import SimulatedNvml
from chaos.health.xidline import parse_xid_line
from tests.unit.health.runctx import fault_of, make_run  # noqa: F401  (fixture)


def test_device_accepts_an_index_or_a_bus_id() -> None:
    assert XidConfig(code=79, device="0000:C1:00.0").device == "0000:c1:00"
    assert XidConfig(code=79, device="3").device == 3
    with pytest.raises(ValidationError, match="PCI bus id"):
        XidConfig(code=79, device="gpu1")


def test_file_sink_writes_a_driver_line_and_tells_the_workload_where(make_run) -> None:
    run = make_run("code: 79, device: 1")
    fault = fault_of(run)
    fault.check(run)
    fault.prepare(run)
    assert run.workload_env["CHAOS_XID_SOURCE"] == f"file:{run.run_dir / 'kernel.log'}"
    details = fault.inject(run)
    assert (details["rank"], details["action"], details["bus_id"]) == (1, "exclude", "0000:0f:00")
    [line] = (run.run_dir / "kernel.log").read_text().splitlines()
    xid = parse_xid_line(line)
    assert xid is not None and (xid.code, xid.bus_id) == (79, "0000:0f:00")
    assert "GPU has fallen off the bus." in line
    assert [r["ev"] for r in run.log.records] == ["xid_write"]


def test_repeats_creep_until_revert(make_run) -> None:
    run = make_run("code: 92, device: 0, sink: nvml, repeat: {every_s: 0.05, count: 50}")
    fault = fault_of(run)
    fault.prepare(run)
    nvml = SimulatedNvml(str(run.run_dir / "nvml_state.json"))
    fault.inject(run)
    time.sleep(0.3)
    fault.revert(run)
    written = len([r for r in run.log.records if r["ev"] == "xid_write"])
    time.sleep(0.15)
    assert 2 <= written < 50
    assert len([r for r in run.log.records if r["ev"] == "xid_write"]) == written  # stopped for good
    assert len(nvml.wait_xid(0.0)) == written
    assert nvml.state(0).ecc_corrected == 64 * written


def test_kmsg_is_refused_without_the_opt_in(make_run) -> None:
    run = make_run("code: 79, device: 0, sink: kmsg")
    with pytest.raises(CapabilityError, match="allow_kmsg: true"):
        fault_of(run).check(run)


@pytest.mark.skipif(shutil.which("dcgmi") is not None, reason="dcgmi is installed here")
def test_dcgm_without_dcgmi_says_how_to_get_it(make_run) -> None:
    run = make_run("code: 79, device: 0, sink: dcgm")
    with pytest.raises(CapabilityError, match="datacenter-gpu-manager"):
        fault_of(run).check(run)


def test_owner_rank_follows_visible_devices(make_run) -> None:
    run = make_run("code: 13, device: 5", env='{CUDA_VISIBLE_DEVICES: "3,5"}')
    fault = fault_of(run)
    fault.prepare(run)
    assert fault.inject(run)["rank"] == 1


@pytest.mark.skipif(os.environ.get("CHAOS_TEST_KMSG") != "1",
                    reason="writes the host's real kernel log: run as root with CHAOS_TEST_KMSG=1 on a staging node")
def test_kmsg_sink_writes_a_real_kernel_log_line_the_kmsg_source_reads(make_run) -> None:
    from chaos.health.sources import KmsgSource

    run = make_run("code: 43, device: 0, sink: kmsg, allow_kmsg: true")
    fault = fault_of(run)
    fault.check(run)
    src = KmsgSource()
    fault.inject(run)
    seen = src.read(2.0)
    src.close()
    assert [(s.code, s.source) for s in seen] == [(43, "kmsg")]
    assert json.dumps(run.log.records[0]["line"]).find("Xid") > 0
