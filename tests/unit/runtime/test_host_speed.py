"""Host speed: the suite telemetry's CPU seconds of one fresh ``import torch`` (tests/suite_telemetry.py), and the
baseline gate's probe (chaos.runtime.host_speed.probe_s); None when either cannot run."""

from __future__ import annotations

import sys

from suite_telemetry import import_torch_cpu_s


def test_measures_a_fresh_interpreter_importing_torch() -> None:
    speed = import_torch_cpu_s(trials=1)
    assert speed is not None and 0.1 < speed < 60  # a real import, not this process's already-loaded module


def test_an_interpreter_that_cannot_import_torch_gives_no_figure(tmp_path) -> None:
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'raise SystemExit(1)'\n")
    fake.chmod(0o755)
    assert import_torch_cpu_s(trials=1, python=str(fake)) is None


def test_the_probe_times_fixed_work_in_parallel_processes(tmp_path) -> None:
    from chaos.runtime.host_speed import probe_s

    speed = probe_s(procs=2)
    assert speed is not None and 0.001 < speed < 30
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho not-a-number\n")
    fake.chmod(0o755)
    assert probe_s(procs=2, python=str(fake)) is None
    assert probe_s(procs=1, python=str(tmp_path / "missing")) is None
