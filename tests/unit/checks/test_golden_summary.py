"""The golden summary's sample order (what exactly_once compares with) and the cache that keeps it by shape."""

from __future__ import annotations

import json
from types import SimpleNamespace

from histsim import Cursor, Sim

from chaos.evidence.finals import summarize_golden
from chaos.run.golden import SUMMARY_VERSION, Golden


def test_the_summary_lists_each_kept_steps_global_samples_per_epoch_in_step_order():
    sim = Sim(dataset_size=6)                              # 4 samples a step: the second step of an epoch is short
    sim.start("0.0")
    sim.train("0.0", 1, 3, Cursor(6), ckpt_every=2)
    sim.start("0.1", load=2, path="/ckpt/step_000002")   # step 3 of 0.0 was rolled back
    sim.train("0.1", 3, 3, sim.resume(2))
    sim.final("0.1", 3)
    perm0, perm1 = Cursor(6).permutation(0), Cursor(6).permutation(1)
    summary = summarize_golden(sim.history())
    assert summary["dataset_size"] == 6 and summary["world_size"] == 2
    assert summary["epoch_samples"] == {"0": [sorted(perm0[:4]), sorted(perm0[4:])], "1": [sorted(perm1[:4])]}


def test_no_sample_order_when_a_step_does_not_report_its_samples():
    sim = Sim()
    sim.start("0.0")
    sim.train("0.0", 1, 2, Cursor(16))
    sim.emit("step", "0.0", 0, step=3, epoch=0, loss=0.1)
    sim.final("0.0", 3)
    assert summarize_golden(sim.history())["epoch_samples"] is None


def test_a_summary_cached_before_the_sample_order_existed_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path))
    experiment = SimpleNamespace(workload_hash=lambda: "abc123", timeout_s=5.0)
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "abc123.json").write_text(json.dumps({"ranks": {}, "world_size": 2}))
    fresh = {"ranks": {}, "world_size": 2, "epoch_samples": {"0": [[1, 2]]}}
    monkeypatch.setattr(Golden, "_run", lambda self: fresh)
    assert Golden(experiment, tmp_path)() == fresh        # type: ignore[arg-type]
    cached = tmp_path / "golden" / f"abc123-v{SUMMARY_VERSION}.json"
    assert json.loads(cached.read_text()) == fresh
