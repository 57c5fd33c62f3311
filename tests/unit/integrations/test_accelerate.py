"""chaos.integrations.accelerate: Accelerate's own checkpoint directories, each save and resume reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


accelerate = pytest.importorskip("accelerate", reason="pip install -e '.[accelerate]' (or '.[dev]')")
helper = pytest.importorskip("chaos.integrations.accelerate")



def test_saves_under_automatic_naming_are_reported_and_load_state_returns_what_accelerate_picked(
        tmp_path: Path, events: Path, records) -> None:
    project = accelerate.utils.ProjectConfiguration(project_dir=str(tmp_path / "proj"),
                                                    automatic_checkpoint_naming=True, total_limit=2)
    acc = accelerate.Accelerator(cpu=True, project_config=project)
    net = torch.nn.Linear(4, 2)
    model, opt = acc.prepare(net, torch.optim.SGD(net.parameters(), lr=0.1))
    assert not helper.has_checkpoint(acc)
    for step in (5, 10, 15):
        helper.save_state(acc, step=step)
    names = [(r["step"], Path(r["path"]).name) for r in records(events, "ckpt_commit")]
    assert names == [(5, "checkpoint_0"), (10, "checkpoint_1"), (15, "checkpoint_2")]
    assert [Path(r["path"]).name for r in records(events, "ckpt_begin")] == \
        ["checkpoint_0", "checkpoint_1", "checkpoint_2"]
    assert helper.has_checkpoint(acc)
    assert Path(helper.load_state(acc)).name == "checkpoint_2"  # total_limit kept checkpoint_1 and _2
