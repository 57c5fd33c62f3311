"""ci/bench/thread_count.py: each setting reaches the harness's environment, and a refused run is not timed."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("thread_count", ROOT / "ci" / "bench" / "thread_count.py")
thread_count = importlib.util.module_from_spec(spec)
spec.loader.exec_module(thread_count)


def _fake_run(seen: list[dict], code: int):
    def run(argv, env, **kwargs):
        seen.append(env)
        return subprocess.CompletedProcess(argv, code, stdout="refused: needs root\n")
    return run


def test_one_thread_sets_it_and_the_default_clears_what_the_caller_set(tmp_path: Path, monkeypatch) -> None:
    seen: list[dict] = []
    monkeypatch.setattr(thread_count.subprocess, "run", _fake_run(seen, 1))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # scripts/test.sh exports it: the default must not inherit it
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    thread_count.run("rank-kill-ddp", True, tmp_path / "cache", tmp_path / "runs")
    thread_count.run("rank-kill-ddp", False, tmp_path / "cache", tmp_path / "runs")
    assert seen[0]["OMP_NUM_THREADS"] == "1" and "MKL_NUM_THREADS" not in seen[0]
    assert "OMP_NUM_THREADS" not in seen[1] and "MKL_NUM_THREADS" not in seen[1]
    assert seen[0]["CHAOS_CACHE_DIR"] == str(tmp_path / "cache")


def test_a_run_that_is_not_a_verdict_stops_the_benchmark(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(thread_count.subprocess, "run", _fake_run([], 2))
    with pytest.raises(SystemExit, match="exited 2"):
        thread_count.run("rank-kill-ddp", True, tmp_path / "cache", tmp_path / "runs")
