"""ChaosCallback on a real transformers.Trainer (one process, CPU): what it reports is what the Trainer did."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch


transformers = pytest.importorskip("transformers", reason="pip install -e '.[hf]' (or '.[dev]')")
hf = pytest.importorskip("chaos.integrations.hf")


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int = 32) -> None:
        self.x = torch.randint(0, 64, (n, 8), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.x[i], "labels": self.x[i]}


def train(out: Path, steps: int, resume: str | None) -> None:
    transformers.set_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_positions=8, n_embd=16, n_layer=1,
                                                                 n_head=2, bos_token_id=0, eos_token_id=0))
    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=steps, save_steps=3, per_device_train_batch_size=4,
        gradient_accumulation_steps=2, dataloader_num_workers=2, use_cpu=True, report_to="none",
        logging_steps=1000, disable_tqdm=True, seed=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=hf.Indexed(Tokens()))
    trainer.add_callback(hf.ChaosCallback())
    trainer.train(resume_from_checkpoint=resume)




def test_a_run_and_its_resume_report_what_the_trainer_did(tmp_path: Path, events: Path, redirect, records) -> None:
    out = tmp_path / "out"
    train(out, 6, None)
    (start,) = records(events, "start")
    assert start["dataset_size"] == 32 and start["stack"].startswith("transformers ")
    assert [(r["step"], r["path"]) for r in records(events, "ckpt_load")] == [(0, None)]
    steps = records(events, "step")
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]
    # Two micro-batches of 4 per optimizer step, taken where each batch reached the model.
    assert all(len(s["samples"]) == 8 for s in steps)
    epoch0 = [i for s in steps if s["epoch"] == 0 for i in s["samples"]]
    assert sorted(epoch0) == list(range(32)) and {s["epoch"] for s in steps[4:]} == {1}
    assert [(r["step"], Path(r["path"]).name) for r in records(events, "ckpt_begin")] == \
        [(3, "checkpoint-3"), (6, "checkpoint-6")]
    commits = records(events, "ckpt_commit")
    assert [r["step"] for r in commits] == [3, 6] and all(r["bytes"] > 0 for r in commits)
    (final,) = records(events, "final")
    assert final["step"] == 6 and len(final["digest"]) == 64

    # Resume from checkpoint-3 in a fresh writer: the same samples for steps 4..6, the same final state.
    shutil.rmtree(out / "checkpoint-6")
    resumed = redirect(tmp_path / "events2")
    train(out, 6, str(out / "checkpoint-3"))
    assert [(r["step"], Path(r["path"]).name) for r in records(resumed, "ckpt_load")] == [(3, "checkpoint-3")]
    assert [(s["step"], s["samples"]) for s in records(resumed, "step")] == [(s["step"], s["samples"])
                                                                             for s in steps[3:]]
    assert records(resumed, "final")[0]["digest"] == final["digest"]


def test_last_complete_checkpoint_passes_over_an_unfinished_save_and_says_so(tmp_path: Path, events: Path,
                                                                            records) -> None:
    out = tmp_path / "out"
    train(out, 6, None)
    (out / "checkpoint-6" / "trainer_state.json").unlink()  # the kill landed before the Trainer's last write
    assert transformers.trainer_utils.get_last_checkpoint(str(out)).endswith("checkpoint-6")
    assert hf.last_complete_checkpoint(out) == str(out / "checkpoint-3")
    (reject,) = records(events, "ckpt_reject")
    assert reject["path"].endswith("checkpoint-6") and "trainer_state.json missing" in reject["reason"]
    assert hf.last_complete_checkpoint(tmp_path / "nothing-here") is None


def test_finding_a_restart_after_the_last_save_trains_a_step_past_max_steps(tmp_path: Path, events: Path, redirect,
                                                                           records) -> None:
    """docs/stacks.md: resumed from its final checkpoint (global_step == max_steps, mid-epoch), the Trainer skips
    into the epoch and trains one more step. If transformers fixes this, this test says so."""
    out = tmp_path / "out"
    train(out, 6, None)
    again = redirect(tmp_path / "events2")
    train(out, 6, transformers.trainer_utils.get_last_checkpoint(str(out)))
    assert [r["step"] for r in records(again, "ckpt_load")] == [6]
    assert [r["step"] for r in records(again, "step")] == [7] and (out / "checkpoint-7").is_dir()
    assert records(again, "final")[0]["step"] == 7
