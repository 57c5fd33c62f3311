"""corrupt-checkpoint on real checkpoint directories: each mode breaks what it says, revert puts it back,
nothing outside the run's checkpoint directory is touched."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from chaos.checkpoint.manifest import build_manifest, verify_manifest, write_manifest
from chaos.checkpoint.verify import verify
from chaos.runtime.context import HarnessLog, RunContext
from chaos.errors import FaultError
from chaos.faults.corrupt_checkpoint import BROKEN_LATEST, CorruptCheckpoint, CorruptCheckpointConfig
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell


def step_dir(root: Path, step: int) -> Path:
    d = root / f"step_{step:06d}"
    d.mkdir(parents=True)
    torch.save({"w": torch.full((128, 128), float(step))}, d / "state.pt")
    torch.save({"rng": torch.arange(8)}, d / "rng_rank0.pt")
    write_manifest(d, build_manifest(d, step))
    return d


@pytest.fixture
def run(tmp_path: Path) -> RunContext:
    ckpt = tmp_path / "ckpt"
    for s in (10, 20):
        step_dir(ckpt, s)
    (ckpt / "latest").write_text("step_000020")
    return RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=ckpt, ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                      shell=Shell(HarnessLog(tmp_path / "harness.jsonl")), log=HarnessLog(tmp_path / "harness.jsonl"),
                      rng=random.Random(0))


def fault(**fields) -> CorruptCheckpoint:
    return CorruptCheckpoint(CorruptCheckpointConfig(**fields), 0)


@pytest.mark.parametrize("mode, expect", [
    ("bitflip", "state.pt: checksum"),
    ("truncate", "state.pt: size"),
    ("delete-shard", "state.pt: missing"),
    ("delete-metadata", "no MANIFEST.json"),
    ("stale-shard", "state.pt: checksum"),
])
def test_each_mode_breaks_latest_and_revert_restores_it(run: RunContext, mode: str, expect: str) -> None:
    f = fault(mode=mode)
    details = f.inject(run)
    target = run.ckpt_dir / "step_000020"
    assert details["path"] == str(target.resolve()) and details["step"] == 20
    problems = verify_manifest(target)
    assert any(p.startswith(expect) for p in problems), problems
    assert verify(run.ckpt_dir / "step_000010").ok
    assert f.revert(run) == []
    assert verify(target).ok
    assert not any((run.run_dir / "backups").iterdir())


def test_stale_shard_swaps_in_the_older_steps_bytes(run: RunContext) -> None:
    details = fault(mode="stale-shard").inject(run)
    assert details["source"].endswith("step_000010/state.pt")
    assert (run.ckpt_dir / "step_000020/state.pt").read_bytes() == (run.ckpt_dir / "step_000010/state.pt").read_bytes()


def test_break_latest_points_at_a_missing_step_and_reverts(run: RunContext) -> None:
    f = fault(mode="break-latest")
    details = f.inject(run)
    assert details["was"] == "step_000020" and (run.ckpt_dir / "latest").read_text() == BROKEN_LATEST
    assert "does not exist" in verify(run.ckpt_dir).problems[0]
    f.revert(run)
    assert (run.ckpt_dir / "latest").read_text() == "step_000020"


def test_targets_a_step_or_a_seeded_random_one(run: RunContext) -> None:
    assert fault(mode="truncate", target=10).inject(run)["step"] == 10
    with pytest.raises(FaultError, match="no committed checkpoint of step 30"):
        fault(mode="truncate", target=30).inject(run)
    picks = {fault(mode="bitflip", target="random").inject(run)["step"] for _ in range(6)}
    assert picks <= {10, 20}


def test_file_glob_chooses_the_victim(run: RunContext) -> None:
    details = fault(mode="delete-shard", file="rng_*").inject(run)
    assert details["file"].endswith("rng_rank0.pt")
    with pytest.raises(FaultError, match="no file matching"):
        fault(mode="delete-shard", file="*.distcp").inject(run)


def test_revert_leaves_a_re_saved_checkpoint_alone(run: RunContext) -> None:
    f = fault(mode="truncate")
    f.inject(run)
    # The workload rejected it and saved step 20 again: the old bytes must not come back over the new.
    victim = run.ckpt_dir / "step_000020/state.pt"
    torch.save({"w": torch.zeros(3)}, victim)
    new = victim.read_bytes()
    f.revert(run)
    assert victim.read_bytes() == new


def test_refuses_paths_that_escape_the_checkpoint_directory(run: RunContext, tmp_path: Path) -> None:
    outside = step_dir(tmp_path / "elsewhere", 30)
    (run.ckpt_dir / "step_000030").symlink_to(outside)
    (run.ckpt_dir / "latest").write_text("step_000030")
    before = (outside / "state.pt").read_bytes()
    with pytest.raises(FaultError, match="outside the run's checkpoint directory"):
        fault(mode="bitflip").inject(run)
    assert (outside / "state.pt").read_bytes() == before


def test_nothing_to_corrupt_yet_and_no_older_step(tmp_path: Path, run: RunContext) -> None:
    with pytest.raises(FaultError, match="no older checkpoint than step_000010"):
        fault(mode="stale-shard", target=10).inject(run)
    run.ckpt_dir = tmp_path / "empty"
    run.ckpt_dir.mkdir()
    with pytest.raises(FaultError, match="no committed checkpoint"):
        fault(mode="bitflip").inject(run)
