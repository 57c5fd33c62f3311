"""ChaosCallback on a real Lightning Trainer (one process, CPU): what it reports is what the Trainer did."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch


L = pytest.importorskip("lightning", reason="pip install -e '.[lightning]' (or '.[dev]')")
integration = pytest.importorskip("chaos.integrations.lightning")


class Examples(torch.utils.data.Dataset):
    def __init__(self, n: int = 32) -> None:
        gen = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 4, generator=gen), torch.randn(n, 1, generator=gen)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i]}


class Module(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 1)
        self.seen_keys: set[str] = set()
        self.losses: list[float] = []

    def training_step(self, batch, batch_idx):
        self.seen_keys |= set(batch)
        loss = torch.nn.functional.mse_loss(self.net(batch["x"]), batch["y"])
        self.losses.append(float(loss))
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(ckpt: Path, steps: int, resume: str | None) -> Module:
    L.seed_everything(0, verbose=False)
    module = Module()
    loader = torch.utils.data.DataLoader(integration.Indexed(Examples()), batch_size=4, shuffle=True, num_workers=2)
    checkpoints = L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt, every_n_train_steps=3, save_top_k=-1)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, accumulate_grad_batches=2, logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[integration.ChaosCallback(), checkpoints])
    trainer.fit(module, loader, ckpt_path=resume)
    return module




def test_a_run_reports_steps_with_their_samples_saves_around_the_write_and_the_final_state(
        tmp_path: Path, events: Path, redirect, records) -> None:
    module = fit(tmp_path / "ckpt", 6, None)
    assert "chaos_index" not in module.seen_keys  # taken off the batch before the training step saw it
    (start,) = records(events, "start")
    assert start["dataset_size"] == 32 and start["stack"].startswith("lightning ")
    assert [(r["step"], r["path"]) for r in records(events, "ckpt_load")] == [(0, None)]
    steps = records(events, "step")
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]
    assert all(len(s["samples"]) == 8 for s in steps)  # two batches of 4 per optimizer step
    assert sorted(i for s in steps[:4] for i in s["samples"]) == list(range(32))  # epoch 0: each index once
    assert [s["epoch"] for s in steps] == [0, 0, 0, 0, 1, 1]
    # The loss training_step returned, averaged over the step's batches: Lightning hands callbacks the loss
    # divided by accumulate_grad_batches, which is what it backpropagates, not what the model scored.
    assert [s["loss"] for s in steps] == pytest.approx(
        [(a + b) / 2 for a, b in zip(module.losses[::2], module.losses[1::2])], rel=1e-6)
    begins, commits = records(events, "ckpt_begin"), records(events, "ckpt_commit")
    assert [r["step"] for r in begins] == [r["step"] for r in commits] == [3, 6]
    assert all(Path(r["path"]).is_file() and r["bytes"] == Path(r["path"]).stat().st_size for r in commits)
    assert records(events, "final")[0]["step"] == 6

    resumed = redirect(tmp_path / "events2")
    path = commits[0]["path"]
    fit(tmp_path / "ckpt2", 6, path)
    assert [(r["step"], r["path"]) for r in records(resumed, "ckpt_load")] == [(3, path)]
    assert [s["step"] for s in records(resumed, "step")] == [4, 5, 6]

    # A last.ckpt link (save_last="link") is reported as the file it pointed to when loaded: later saves move it on.
    linked = redirect(tmp_path / "events3")
    (tmp_path / "last.ckpt").symlink_to(path)
    fit(tmp_path / "ckpt3", 4, str(tmp_path / "last.ckpt"))
    assert [(r["step"], r["path"]) for r in records(linked, "ckpt_load")] == [(3, os.path.realpath(path))]
