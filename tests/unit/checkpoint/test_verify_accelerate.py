"""Accelerate save_state directories: finished, unfinished, torn, and the automatic-naming resume hazard."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from chaos.checkpoint.verify import claims_committed, detect_kind, selection_hazards, verify

accelerate = pytest.importorskip("accelerate", reason="pip install -e '.[accelerate]' (or '.[dev]')")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real save_state directory (model, optimizer, RNG state) from a one-process Accelerator."""
    out = tmp_path_factory.mktemp("accelerate") / "checkpoint_0"
    acc = accelerate.Accelerator(cpu=True)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model, opt = acc.prepare(model, opt)
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    acc.save_state(str(out))
    return out


def copy(saved: Path, dest: Path) -> Path:
    shutil.copytree(saved, dest)
    return dest


def test_a_finished_save_verifies(saved: Path) -> None:
    assert detect_kind(saved) == "accelerate" and claims_committed(saved)
    report = verify(saved)
    assert report.ok, report.all_problems()
    # The RNG state is a torch.save archive of Python objects: CRC-checked, not unpickled.
    assert any(n.startswith("random_states_0.pkl: holds Python objects beyond tensors") for n in report.notes)


def test_a_save_killed_before_the_rng_state_is_unfinished_and_a_torn_optimizer_is_named(saved: Path,
                                                                                       tmp_path: Path) -> None:
    unfinished = copy(saved, tmp_path / "checkpoint_1")
    (unfinished / "random_states_0.pkl").unlink()
    assert not claims_committed(unfinished)
    assert "random_states_0.pkl missing" in verify(unfinished).summary()
    torn = copy(saved, tmp_path / "checkpoint_2")
    opt = torn / "optimizer.bin"
    opt.write_bytes(opt.read_bytes()[: opt.stat().st_size // 2])
    assert "optimizer.bin: torn zip archive" in verify(torn).summary()


def test_load_state_with_automatic_naming_picks_the_newest_even_unfinished(saved: Path, tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    copy(saved, root / "checkpoint_0")
    copy(saved, root / "checkpoint_1")
    assert selection_hazards(root) == [] and verify(root).ok
    (root / "checkpoint_1" / "random_states_0.pkl").unlink()
    (hazard,) = selection_hazards(root)
    assert hazard.startswith("checkpoint_1 is an unfinished save (no random_states_0.pkl)")
    assert not verify(root).ok


def test_a_save_killed_among_the_registered_objects_is_told_apart_by_its_finished_siblings(
        saved: Path, tmp_path: Path) -> None:
    """Registered objects (custom_checkpoint_N.pkl) are written after the RNG states: alone, such a directory
    looks finished; beside one that has the object's file, it is not, and load_state() would pick it."""
    root = tmp_path / "checkpoints"
    finished = copy(saved, root / "checkpoint_0")
    torch.save({"step": 5}, finished / "custom_checkpoint_0.pkl")
    torn = copy(saved, root / "checkpoint_1")
    assert claims_committed(finished) and not claims_committed(torn)
    assert "custom_checkpoint_0.pkl (which checkpoint_0 beside it has) missing" in verify(torn).summary()
    (hazard,) = selection_hazards(root)
    assert hazard.startswith("checkpoint_1 is an unfinished save (it lacks custom_checkpoint_0.pkl")
    assert "chaos.integrations.accelerate.last_complete_checkpoint" in hazard
    assert not verify(root).ok
    torch.save({"step": 10}, torn / "custom_checkpoint_0.pkl")  # the save finished after all
    assert claims_committed(torn) and verify(root).ok and selection_hazards(root) == []


def test_the_value_scan_reads_a_finished_save_whole(saved: Path) -> None:
    """Every file of a real save_state is read (weights, optimizer, scheduler) or known to hold no trained values
    (the RNG state's numpy arrays, never unpickled): no_corrupt_commit can prove such a checkpoint finite."""
    from chaos.checkpoint.values import scan

    out = scan(saved)
    assert not out["unscanned"] and out["tensors"] and out["nonfinite"] == 0, out
    assert [s.split(" ")[0] for s in out["skipped"]] == ["random_states_0.pkl"]
