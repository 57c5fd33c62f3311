"""Hugging Face Trainer checkpoint-N directories: finished, torn, half-written, and the resume rule's hazard."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from chaos.checkpoint.verify import claims_committed, detect_kind, selection_hazards, verify

safetensors_torch = pytest.importorskip("safetensors.torch", reason="pip install -e '.[dev]' (safetensors)")


def make_hf_checkpoint(path: Path, step: int, *, state: bool = True) -> Path:
    """What Trainer._save_checkpoint writes, in its order: weights, optimizer + scheduler, RNG, trainer state."""
    path.mkdir(parents=True)
    safetensors_torch.save_file({"wte": torch.randn(16, 8), "head": torch.randn(8, 16)}, str(path / "model.safetensors"))
    (path / "config.json").write_text("{}")
    torch.save({"state": {0: {"momentum": torch.randn(16, 8)}}, "param_groups": [{"lr": 0.1}]}, path / "optimizer.pt")
    torch.save({"last_epoch": step}, path / "scheduler.pt")
    # The real RNG file pickles Python and numpy state: not loadable with weights_only.
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()},
               path / "rng_state_0.pth")
    if state:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step, "epoch": 0.5}))
    return path


def test_a_finished_checkpoint_verifies_and_says_what_it_could_not_load(tmp_path: Path) -> None:
    ckpt = make_hf_checkpoint(tmp_path / "checkpoint-10", 10)
    assert detect_kind(ckpt) == "hf-trainer" and claims_committed(ckpt)
    report = verify(ckpt)
    assert report.ok, report.all_problems()
    assert report.kind == "hf-trainer" and report.step == 10 and report.files == 6
    assert any("rng_state_0.pth: holds Python objects beyond tensors" in n for n in report.notes)


def test_a_save_killed_before_its_trainer_state_is_unfinished(tmp_path: Path) -> None:
    ckpt = make_hf_checkpoint(tmp_path / "checkpoint-10", 10, state=False)
    assert detect_kind(ckpt) == "hf-trainer" and not claims_committed(ckpt)
    assert "trainer_state.json missing" in verify(ckpt).summary()


@pytest.mark.parametrize("damage, expected", [
    ("truncate-weights", "model.safetensors: truncated"),
    ("flip-optimizer", "optimizer.pt: CRC mismatch"),
    ("step-mismatch", "trainer_state.json says global_step 7, the name says 10"),
    ("no-weights", "no model weights"),
    ("bad-state", "trainer_state.json unreadable"),
])
def test_each_damage_is_named(tmp_path: Path, damage: str, expected: str) -> None:
    ckpt = make_hf_checkpoint(tmp_path / "checkpoint-10", 10)
    if damage == "truncate-weights":
        weights = ckpt / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "flip-optimizer":
        opt = ckpt / "optimizer.pt"
        data = bytearray(opt.read_bytes())
        data[len(data) // 2] ^= 0x01  # inside the momentum tensor's record, the bulk of the file
        opt.write_bytes(bytes(data))
    elif damage == "step-mismatch":
        (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 7}))
    elif damage == "no-weights":
        (ckpt / "model.safetensors").unlink()
    elif damage == "bad-state":
        (ckpt / "trainer_state.json").write_text("{\"global_st")
    report = verify(ckpt)
    assert not report.ok and expected in report.summary(), report.summary()


def test_the_newest_unfinished_save_is_a_hazard_because_get_last_checkpoint_picks_it(tmp_path: Path) -> None:
    root = tmp_path / "out"
    make_hf_checkpoint(root / "checkpoint-5", 5)
    make_hf_checkpoint(root / "checkpoint-10", 10, state=False)
    transformers = pytest.importorskip("transformers")
    assert transformers.trainer_utils.get_last_checkpoint(str(root)).endswith("checkpoint-10")  # the rule we judge
    hazards = selection_hazards(root)
    assert len(hazards) == 1 and "checkpoint-10 is an unfinished save" in hazards[0]
    report = verify(root)
    assert not report.ok and [Path(c.path).name for c in report.children] == ["checkpoint-5"]
    assert report.children[0].ok
    # Finished (or an unfinished one that is not the newest): no hazard.
    (root / "checkpoint-10" / "trainer_state.json").write_text(json.dumps({"global_step": 10}))
    assert selection_hazards(root) == [] and verify(root).ok


def test_an_fsdp_checkpoint_keeps_model_and_optimizer_as_dcp_directories(tmp_path: Path, make) -> None:
    ckpt = make_hf_checkpoint(tmp_path / "checkpoint-10", 10)
    (ckpt / "model.safetensors").unlink()
    make.dcp_dir(ckpt / "pytorch_model_fsdp_0")
    assert verify(ckpt).ok, verify(ckpt).all_problems()
    shard = next((ckpt / "pytorch_model_fsdp_0").glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[:10])
    assert "pytorch_model_fsdp_0: " in verify(ckpt).summary() and "truncated" in verify(ckpt).summary()
