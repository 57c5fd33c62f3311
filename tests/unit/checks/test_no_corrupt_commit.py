"""no_corrupt_commit over scans of real checkpoints written with torch (issue 56 item 3): the witness's own look
(chaos.evidence.witness.look) at a committed checkpoint whose NaN weights sit where the scan once did not read
(a DCP save in a subfolder, a ``checkpoint.pth.tar``) beside a clean ``trainer.pt``, and at one holding a file
no reader knows."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from mutations import _copy, _looks, verdict_of  # noqa: E402
from truth import Params, play  # noqa: E402

from chaos.evidence.witness import look  # noqa: E402


def poisoned_weights() -> dict[str, torch.Tensor]:
    w = torch.ones(8, 8)
    w[2, 3] = math.nan
    return {"w": w, "b": torch.zeros(8)}


def trainer_file(step: Path) -> None:
    """What a DCP trainer writes beside its shards: a clean RNG state and step (scanned tensors, all finite)."""
    torch.save({"rng": torch.zeros(16, dtype=torch.uint8), "step": 20}, step / "trainer.pt")


def dcp_in_subfolder(step: Path) -> Path:
    import torch.distributed.checkpoint as dcp

    step.mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no process group: loading in a single process" is the intent
        dcp.save({"model": poisoned_weights()}, checkpoint_id=str(step / "model"))
    trainer_file(step)
    return step


def pth_tar(step: Path) -> Path:
    step.mkdir(parents=True)
    torch.save({"state_dict": poisoned_weights()}, step / "checkpoint.pth.tar")
    trainer_file(step)
    return step


def judged(step: Path, golden: Path | None = None):
    """The no_corrupt_commit verdict on a run whose last commit is ``step`` as the witness scanned it; with
    ``golden``, golden_digests on and the fault-free run's checkpoint at that step is ``golden`` as scanned."""
    fields = look({"path": str(step), "scan": True, "seen": "ckpt_commit"})
    truth = _copy(play(Params()))
    target = _looks(truth, "ckpt_commit")[-1]
    target["values"] = dict(fields["values"])
    if golden is not None:
        fault_free = look({"path": str(golden), "scan": True})["values"]
        truth.golden["ckpt_digests"][str(target["step"])] = fault_free["digest"]
    return verdict_of("no_corrupt_commit", {"golden_digests": golden is not None}, truth), fields["values"]


@pytest.mark.parametrize("make", [dcp_in_subfolder, pth_tar], ids=["dcp-subfolder", "pth-tar"])
def test_nan_weights_the_scan_once_passed_over_fail_the_check(tmp_path: Path, make) -> None:
    """Before the fix: the scan read trainer.pt only, found its tensors finite, and the check PASSed NaN weights."""
    step = make(tmp_path / "step_000020")
    result, values = judged(step)
    assert values["nonfinite"] == 1, values
    assert result.verdict == "fail", result.reason
    assert "1 non-finite value(s)" in result.reason and ".w (1 of 64)" in result.reason


@pytest.mark.parametrize("stray", ["notes.bin", "weights.npz"])
def test_a_file_no_reader_knows_is_named_and_the_check_is_inconclusive(tmp_path: Path, stray: str) -> None:
    """A ``.bin`` that is no torch file, and data under an extension no verifier reads: their numbers are unknown."""
    step = tmp_path / "step_000020"
    step.mkdir()
    torch.save({"model": {"w": torch.ones(4)}}, step / "state.pt")
    (step / stray).write_bytes(b"\x00\x01\x02\x03" * 64)
    result, values = judged(step)
    assert [u.split(" ")[0] for u in values["unscanned"]] == [stray], values
    assert result.verdict == "inconclusive" and stray in result.reason, result.reason


def test_a_clean_checkpoint_of_every_shape_still_passes(tmp_path: Path) -> None:
    """The same layouts with finite weights, MANIFEST.json beside them: every file read or known to hold no values."""
    import torch.distributed.checkpoint as dcp

    from chaos.checkpoint.manifest import build_manifest, write_manifest

    step = tmp_path / "step_000020"
    step.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"model": {"w": torch.ones(8, 8)}}, checkpoint_id=str(step / "model"))
    torch.save({"state_dict": {"w": torch.ones(3)}}, step / "checkpoint.pth.tar")
    trainer_file(step)
    write_manifest(step, build_manifest(step, 20, format="test"))
    result, values = judged(step)
    assert not values["unscanned"] and values["nonfinite"] == 0, values
    assert result.verdict == "pass", result.reason


@pytest.mark.parametrize("where", ["dcp-subfolder", "pth-tar"])
def test_golden_digests_cover_the_files_the_scan_once_passed_over(tmp_path: Path, where: str) -> None:
    """A finite flipped bit in the DCP subfolder's or the .pth.tar's weights: the digest covers them, so the
    checkpoint differs from the fault-free run's; the same state saved again equals it."""
    import torch.distributed.checkpoint as dcp

    def save(step: Path, weights: dict[str, torch.Tensor]) -> Path:
        step.mkdir(parents=True)
        if where == "dcp-subfolder":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dcp.save({"model": weights}, checkpoint_id=str(step / "model"))
        else:
            torch.save({"state_dict": weights}, step / "checkpoint.pth.tar")
        trainer_file(step)
        return step

    torch.manual_seed(0)
    weights = {"w": torch.randn(8, 8)}
    golden = save(tmp_path / "golden" / "step_000012", weights)
    same, _ = judged(save(tmp_path / "same" / "step_000012", {"w": weights["w"].clone()}), golden=golden)
    assert same.verdict == "pass" and "equal to the fault-free run's" in same.reason, same.reason
    flipped = {"w": weights["w"].clone()}
    flipped["w"].reshape(-1)[5:6].view(torch.int32).bitwise_xor_(1 << 3)
    result, values = judged(save(tmp_path / "flipped" / "step_000012", flipped), golden=golden)
    assert values["nonfinite"] == 0 and not values["unscanned"]
    assert result.verdict == "fail" and "differs from the fault-free run's" in result.reason, result.reason
