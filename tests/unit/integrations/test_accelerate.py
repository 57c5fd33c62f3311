"""chaos.integrations.accelerate: Accelerate's own checkpoint directories, each save and resume reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


accelerate = pytest.importorskip("accelerate", reason="pip install -e '.[accelerate]' (or '.[dev]')")
helper = pytest.importorskip("chaos.integrations.accelerate")


def automatic_naming(tmp_path: Path, total_limit: int):
    """An Accelerator saving checkpoint_N directories under tmp_path/proj, with a prepared model and optimizer."""
    project = accelerate.utils.ProjectConfiguration(project_dir=str(tmp_path / "proj"),
                                                    automatic_checkpoint_naming=True, total_limit=total_limit)
    acc = accelerate.Accelerator(cpu=True, project_config=project)
    net = torch.nn.Linear(4, 2)
    acc.prepare(net, torch.optim.SGD(net.parameters(), lr=0.1))
    return acc



def test_saves_under_automatic_naming_are_reported_and_load_state_returns_what_accelerate_picked(
        tmp_path: Path, events: Path, records) -> None:
    acc = automatic_naming(tmp_path, total_limit=2)
    assert not helper.has_checkpoint(acc)
    for step in (5, 10, 15):
        helper.save_state(acc, step=step)
    names = [(r["step"], Path(r["path"]).name) for r in records(events, "ckpt_commit")]
    assert names == [(5, "checkpoint_0"), (10, "checkpoint_1"), (15, "checkpoint_2")]
    assert [Path(r["path"]).name for r in records(events, "ckpt_begin")] == \
        ["checkpoint_0", "checkpoint_1", "checkpoint_2"]
    assert helper.has_checkpoint(acc)
    assert Path(helper.load_state(acc)).name == "checkpoint_2"  # total_limit kept checkpoint_1 and _2


class Position:
    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]


def test_last_complete_checkpoint_passes_over_a_save_killed_before_its_registered_objects(
        tmp_path: Path, events: Path, records) -> None:
    acc = automatic_naming(tmp_path, total_limit=3)
    position = Position()
    acc.register_for_checkpointing(position)
    assert helper.last_complete_checkpoint(acc) is None and helper.next_iteration(acc) == 0
    for step in (5, 10):
        position.step = step
        helper.save_state(acc, step=step)
    newest = Path(helper.load_state(acc))
    (newest / "custom_checkpoint_0.pkl").unlink()  # killed after the RNG states, before the loop's state
    assert helper.unfinished_parts(acc, newest) == ["custom_checkpoint_0.pkl"]
    path = helper.last_complete_checkpoint(acc)
    assert Path(path).name == "checkpoint_0"
    (reject,) = records(events, "ckpt_reject")
    assert Path(reject["path"]).name == "checkpoint_1" and "custom_checkpoint_0.pkl missing" in reject["reason"]
    helper.load_state(acc, path)
    assert position.step == 5
    # The counter continues past checkpoint_1, which save_state would refuse to overwrite.
    assert helper.next_iteration(acc) == 2
