"""The value scan: every tensor of a checkpoint loaded (weights_only) and its non-finite values counted."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from chaos.checkpoint.values import scan


class Custom:
    """Not a tensor: a weights_only load refuses it."""


def test_a_nan_is_counted_and_named_wherever_it_sits(tmp_path: Path) -> None:
    step = tmp_path / "step_000020"
    step.mkdir()
    weight = torch.ones(4, 4)
    weight[1, 2] = math.nan
    torch.save({"model": {"w": weight, "b": torch.zeros(4)}, "optim": {"state": {0: {"exp_avg": torch.full((4,), math.inf)}}},
                "step": 20}, step / "state.pt")
    torch.save({"rng": torch.zeros(8, dtype=torch.uint8)}, step / "rng_rank0.pt")
    out = scan(step)
    assert out["nonfinite"] == 5 and out["tensors"] == 4 and not out["unscanned"]
    assert out["bad"] == ["state.pt.model.w (1 of 16)", "state.pt.optim.state.0.exp_avg (4 of 4)"]


def test_a_clean_file_scans_clean_and_an_unloadable_one_is_named(tmp_path: Path) -> None:
    torch.save({"w": torch.randn(3)}, tmp_path / "clean.pt")
    out = scan(tmp_path / "clean.pt")
    assert {k: v for k, v in out.items() if k != "digest"} == {"tensors": 1, "values": 3, "nonfinite": 0, "bad": [],
                                                              "unscanned": [], "skipped": []}
    torch.save({"obj": Custom()}, tmp_path / "objects.pt")
    out = scan(tmp_path / "objects.pt")
    assert out["unscanned"] and out["unscanned"][0].startswith("objects.pt (")
    (tmp_path / "empty").mkdir()
    assert scan(tmp_path / "empty")["unscanned"] == ["empty (no tensor file found)"]


def test_the_digest_is_the_state_not_the_file(tmp_path: Path) -> None:
    """Same state saved twice: one digest. One flipped mantissa bit (finite, plausible) or another step: another."""
    torch.manual_seed(0)
    state = {"model": {"w": torch.randn(4, 4)}, "step": 20}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        torch.save(state, tmp_path / name / "state.pt")
    assert scan(tmp_path / "a")["digest"] == scan(tmp_path / "b")["digest"]
    flipped = {"model": {"w": state["model"]["w"].clone()}, "step": 20}
    flipped["model"]["w"].reshape(-1)[3:4].view(torch.int32).bitwise_xor_(1 << 4)
    torch.save(flipped, tmp_path / "b" / "state.pt")
    assert scan(tmp_path / "b")["nonfinite"] == 0 and scan(tmp_path / "a")["digest"] != scan(tmp_path / "b")["digest"]
    torch.save({**state, "step": 21}, tmp_path / "b" / "state.pt")
    assert scan(tmp_path / "a")["digest"] != scan(tmp_path / "b")["digest"]


class TrainingArguments:
    """Pickled under transformers' name (a stand-in module, so the test does not import transformers)."""


def test_a_trainers_rng_state_and_arguments_are_named_not_scanned_never_unpickled(tmp_path: Path, monkeypatch) -> None:
    """The HF Trainer's checkpoint-N: rng_state_*.pth (numpy arrays) and training_args.bin (TrainingArguments) hold
    no trained values and pickle objects: recognised by name and by the globals they name, listed as skipped. Numpy
    is never unpickled (its dtype states can corrupt memory), and the same names holding anything else are gaps."""
    import sys
    import types

    import numpy as np

    for name in ("transformers", "transformers.training_args"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setattr(TrainingArguments, "__module__", "transformers.training_args")
    sys.modules["transformers.training_args"].TrainingArguments = TrainingArguments  # type: ignore[attr-defined]
    ckpt = tmp_path / "checkpoint-20"
    ckpt.mkdir()
    torch.save({"w": torch.ones(2)}, ckpt / "optimizer.pt")
    torch.save({"numpy": np.random.RandomState(0).get_state(), "cpu": torch.zeros(4, dtype=torch.uint8)},
               ckpt / "rng_state_0.pth")
    torch.save(TrainingArguments(), ckpt / "training_args.bin")
    out = scan(ckpt)
    assert not out["unscanned"] and out["tensors"] == 1
    assert [s.split(" ")[0] for s in out["skipped"]] == ["rng_state_0.pth", "training_args.bin"]
    torch.save({"numpy": np.zeros(2), "obj": Custom()}, ckpt / "rng_state_0.pth")
    torch.save({"w": torch.ones(2), "obj": Custom()}, ckpt / "training_args.bin")
    out = scan(ckpt)
    assert sorted(u.split(" ")[0] for u in out["unscanned"]) == ["rng_state_0.pth", "training_args.bin"]
    assert not out["skipped"]


def test_a_trainers_bookkeeping_may_hold_an_infinite_score_but_nothing_else(tmp_path: Path) -> None:
    """Lightning's ModelCheckpoint starts its k-th best score at -inf by design: not a corrupt weight. A NaN score,
    or a whole model kept under callbacks (StochasticWeightAveraging's), is judged as weights are."""
    ckpt = tmp_path / "epoch=0-step=5.ckpt"
    score = {"ModelCheckpoint": {"kth_value": torch.tensor(-math.inf)}}
    torch.save({"state_dict": {"w": torch.ones(3)}, "callbacks": score}, ckpt)
    assert scan(ckpt)["nonfinite"] == 0
    torch.save({"state_dict": {"w": torch.tensor([1.0, math.nan])}, "callbacks": score}, ckpt)
    out = scan(ckpt)
    assert out["nonfinite"] == 1 and out["bad"] == [f"{ckpt.name}.state_dict.w (1 of 2)"]
    torch.save({"state_dict": {"w": torch.ones(3)},
                "callbacks": {"SWA": {"average_model_state": {"w": torch.tensor([math.inf, 1.0])}},
                              "ModelCheckpoint": {"best": torch.tensor(math.nan)}}}, ckpt)
    assert scan(ckpt)["nonfinite"] == 2


def _dcp_save(state: dict, folder: Path) -> None:
    import warnings

    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no process group: saved from this one process, as intended
        dcp.save(state, checkpoint_id=str(folder))


def test_dcp_checkpoints_at_any_depth_and_torch_files_by_content_are_read(tmp_path: Path) -> None:
    """A model saved as DCP in a subfolder (two levels down too) and a torch.save under a name no suffix rule knows
    (checkpoint.pth.tar) are read like the trainer file beside them (issue 56: the scan passed over both)."""
    step = tmp_path / "step_000020"
    _dcp_save({"model": {"w": torch.tensor([1.0, math.nan])}}, step / "model")
    _dcp_save({"optim": {"m": torch.tensor([math.inf])}}, step / "shards" / "optim")
    torch.save({"state_dict": {"w": torch.tensor([math.nan, 1.0, 2.0])}}, step / "checkpoint.pth.tar")
    torch.save({"rng": torch.zeros(4, dtype=torch.uint8)}, step / "trainer.pt")
    out = scan(step)
    assert not out["unscanned"] and out["tensors"] == 4 and out["nonfinite"] == 3, out
    assert out["bad"] == ["model/model.w (1 of 2)", "shards/optim/optim.m (1 of 1)",
                          "checkpoint.pth.tar.state_dict.w (1 of 3)"]


def test_every_file_not_read_is_named(tmp_path: Path) -> None:
    """A stray .bin that is no torch file, data under an unknown extension, a shard .metadata does not reference, a
    DCP subfolder that will not load, JSON that does not parse, a dangling link: each named unscanned, its numbers
    unknown."""
    step = tmp_path / "step_000020"
    _dcp_save({"model": {"w": torch.ones(2)}}, step / "model")
    _dcp_save({"optim": {"m": torch.ones(2)}}, step / "optim")
    torch.save({"w": torch.ones(2)}, step / "trainer.pt")
    (step / "notes.bin").write_bytes(b"not a torch file")
    (step / "weights.npy").write_bytes(b"\x93NUMPY" + bytes(64))
    (step / "model" / "__9_0.distcp").write_bytes(bytes(16))
    next((step / "optim").glob("*.distcp")).write_bytes(b"")  # torn: .metadata reads past its end
    (step / "config.json").write_text("{not json")
    (step / "ema.pt").symlink_to(tmp_path / "pruned.pt")  # a link whose target is gone
    # A marker a manager writes when a save is done, and a vocabulary: text, under names no tensor format claims.
    (step / "COMMITTED").write_text("20")
    (step / "vocab.txt").write_text("hello\nworld\n")
    out = scan(step)
    assert sorted(u.split(" ")[0] for u in out["unscanned"]) == [
        "config.json", "ema.pt", "model/__9_0.distcp", "notes.bin", "optim", "weights.npy"], out["unscanned"]
    assert {"COMMITTED", "vocab.txt"} <= {s.split(" ")[0] for s in out["skipped"]}, out["skipped"]
    assert out["tensors"] == 2 and any(u.startswith("optim (DCP state could not be loaded: ") for u in out["unscanned"])


def test_json_records_and_accelerates_rng_state_hold_no_trained_values(tmp_path: Path) -> None:
    """What every checkpoint of a stack carries beside its tensors is skipped, named, and kept out of the digest
    (MANIFEST.json holds its creation time, so a fault-free run's would differ with no corruption)."""
    import numpy as np

    from chaos.checkpoint.manifest import build_manifest, write_manifest

    step = tmp_path / "step_000020"
    step.mkdir()
    torch.save({"w": torch.ones(2)}, step / "state.pt")
    before = scan(step)["digest"]
    (step / "trainer_state.json").write_text('{"global_step": 20, "log_history": [{"loss": NaN}]}')
    torch.save({"numpy_random_seed": np.random.RandomState(0).get_state(), "step": 20}, step / "random_states_0.pkl")
    write_manifest(step, build_manifest(step, 20, format="test"))
    out = scan(step)
    assert not out["unscanned"] and out["nonfinite"] == 0 and out["digest"] == before
    assert [s.split(" ")[0] for s in out["skipped"]] == ["MANIFEST.json", "random_states_0.pkl", "trainer_state.json"]
