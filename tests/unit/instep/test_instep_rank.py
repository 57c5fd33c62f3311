"""The rank side of in-step faults, in process: real torch hooks on a real model and optimizer."""

from __future__ import annotations

import json
import math
from collections import namedtuple
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from chaos import sdk
from chaos.instep import rank as instep_rank
from chaos.instep.command import Command, applied, read_all, write


def instep_events(folder: Path) -> list[dict[str, Any]]:
    return [r for f in sorted(folder.glob("*.jsonl")) for r in map(json.loads, f.read_text().splitlines())
            if r["ev"] == "instep"]


class Job:
    """A tiny model, its optimizer and an in-step runtime for rank ``rank`` over ``folder``."""

    def __init__(self, folder: Path, rank: int = 0) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.runtime = instep_rank.Runtime(str(folder), rank)
        self.runtime.install()
        self.step = 0
        self.losses: list[float] = []

    def train(self, n: int = 1) -> None:
        for _ in range(n):
            x = torch.ones(3, 4)
            loss = self.model(x).pow(2).mean()
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
            self.step += 1
            self.losses.append(float(loss))
            sdk.step(self.step, epoch=0, samples=[self.step], loss=float(loss))

    def close(self) -> None:
        self.runtime.uninstall()


@pytest.fixture
def job(tmp_path: Path, events: Path) -> Iterator[Job]:
    j = Job(tmp_path / "instep")
    (tmp_path / "instep").mkdir(exist_ok=True)
    yield j
    j.close()


def test_a_nan_in_the_loss_acts_in_the_next_step_once_and_says_where(job: Job, events: Path, tmp_path: Path) -> None:
    job.train(2)
    write(str(tmp_path / "instep"), Command(index=0, kind="nan", where="loss", ranks=[0], steps=1,
                                            params={"value": math.nan}))
    job.runtime.poll()  # what chaos.sdk.step does once the harness releases a held step
    job.train(3)
    assert [math.isnan(v) for v in job.losses] == [False, False, True, True, True]  # SGD carried the NaN on
    [landed] = instep_events(events)
    assert landed["step"] == 3 and landed["fault"] == 0 and landed["where"] == "loss"
    assert applied(str(tmp_path / "instep"), 0, 0) == 1 and not job.runtime.armed
    assert not job.runtime._forward_hooks, "the forward hooks stay only while a forward fault is armed"


def test_a_fault_used_up_is_not_applied_again_by_the_attempt_that_resumes(tmp_path: Path, events: Path) -> None:
    folder = tmp_path / "instep"
    folder.mkdir()
    write(str(folder), Command(index=0, kind="nan", where="loss", ranks=None, steps=1, params={"value": math.nan}))
    first = Job(folder)
    first.runtime.poll()
    first.train(1)
    first.close()
    resumed = Job(folder)  # a new process, the command still there
    resumed.runtime.poll()
    resumed.train(2)
    resumed.close()
    assert math.isnan(first.losses[0]) and not any(math.isnan(v) for v in resumed.losses)
    assert len(instep_events(events)) == 1


def test_a_fault_for_another_rank_does_nothing_here(job: Job, events: Path, tmp_path: Path) -> None:
    write(str(tmp_path / "instep"), Command(index=0, kind="nan", where="loss", ranks=[1], steps=None,
                                            params={"value": math.nan}))
    job.runtime.poll()
    job.train(3)
    assert not any(math.isnan(v) for v in job.losses) and not instep_events(events)


def test_a_persistent_fault_acts_until_the_harness_removes_it(job: Job, events: Path, tmp_path: Path) -> None:
    folder = tmp_path / "instep"
    path = write(str(folder), Command(index=2, kind="loss-spike", where="loss", steps=None, params={"value": 1e3}))
    job.runtime.poll()
    job.train(3)
    Path(path).unlink()  # the revert, after step 3's boundary: seen at step 4's
    job.train(3)
    assert [e["step"] for e in instep_events(events)] == [1, 2, 3, 4]
    assert read_all(str(folder)) == [] and not job.runtime.armed


def test_bitflip_flips_the_asked_bit_of_one_parameter_element_between_steps(job: Job, events: Path,
                                                                          tmp_path: Path) -> None:
    job.train(1)
    weight = job.model[0].weight
    before = weight.detach().reshape(-1)[5].item()
    write(str(tmp_path / "instep"), Command(index=1, kind="bitflip", where="param", ranks=[0], steps=1,
                                            params={"bit": 30, "tensor": 0, "element": 5}))
    job.runtime.poll()
    after = weight.detach().reshape(-1)[5].item()
    as_int = lambda v: torch.tensor([v], dtype=torch.float32).view(torch.int32).item()  # noqa: E731
    assert as_int(before) ^ as_int(after) == 1 << 30 and abs(after) > 1e30
    [landed] = instep_events(events)
    assert landed["element"] == 5 and landed["step"] == 2 and landed["before"] == pytest.approx(before)


def test_a_nan_in_one_gradient_before_the_all_reduce(job: Job, events: Path, tmp_path: Path) -> None:
    job.train(1)
    write(str(tmp_path / "instep"), Command(index=0, kind="nan", where="grad", ranks=[0], steps=1,
                                            params={"value": math.nan, "tensor": 2}))
    job.runtime.poll()
    x = torch.ones(3, 4)
    job.model(x).pow(2).mean().backward()
    grads = [p.grad for p in job.model.parameters()]
    assert torch.isnan(grads[2]).all() and torch.isfinite(grads[0]).all()


def test_an_oom_raises_what_cuda_raises_in_the_forward(job: Job, events: Path, tmp_path: Path) -> None:
    job.train(1)
    write(str(tmp_path / "instep"), Command(index=3, kind="oom", where="forward", ranks=[0], steps=1,
                                            params={"gib": 3.0}))
    job.runtime.poll()
    with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory. Tried to allocate 3.00 GiB"):
        job.train(1)
    job.train(1)  # once: the next forward is clean
    [event] = instep_events(events)
    assert event["where"] == "forward" and event["allocator"] == "injected"  # a CPU rank: no allocator to ask


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU: run bash ci/gpu_check.sh on one")
def test_on_cuda_the_oom_is_the_caching_allocators_own(tmp_path: Path, events: Path) -> None:
    torch.cuda.init()
    ooms = torch.cuda.memory_stats().get("num_ooms", 0)
    error, allocator = instep_rank._oom({"gib": 1.0})
    assert allocator == "cuda" and isinstance(error, torch.OutOfMemoryError)
    assert str(error).startswith("CUDA out of memory. Tried to allocate")
    assert torch.cuda.memory_stats()["num_ooms"] == ooms + 1  # counted by the allocator, as any OOM
    assert torch.cuda.memory_allocated() == 0  # nothing is held after it


def test_scaling_reaches_every_floating_tensor_of_any_output_shape() -> None:
    Out = namedtuple("Out", "logits aux")
    out = instep_rank._scaled({"loss": torch.tensor(2.0), "ids": torch.tensor([1]),
                              "nested": (torch.tensor([1.0]), Out(torch.tensor([3.0]), None))}, 10.0)
    assert out["loss"].item() == 20.0 and out["ids"].item() == 1
    assert out["nested"][0].item() == 10.0 and out["nested"][1].logits.item() == 30.0 and out["nested"][1].aux is None


@pytest.mark.parametrize("dtype, bit", [(torch.float32, 31), (torch.float16, 15), (torch.bfloat16, 14),
                                        (torch.float64, 62)])
def test_flip_works_for_every_float_width(dtype: torch.dtype, bit: int) -> None:
    t = torch.tensor([0.5, 0.25], dtype=dtype)
    instep_rank._flip(t, 1, bit)
    assert t[0].item() == 0.5 and t[1].item() != 0.25
    with pytest.raises(ValueError, match="outside"):
        instep_rank._flip(t, 0, torch.finfo(dtype).bits)


def test_an_element_of_a_non_contiguous_tensor_is_written_in_place() -> None:
    # A transposed weight: a reshape of it is a copy, and a write through the copy would be lost.
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    assert not t.is_contiguous()
    instep_rank._flip(t, 5, 30)  # flat element 5 of the (4, 3) view is t[1, 2] (9.0)
    assert t[1, 2].item() != 9.0 and t.flatten().tolist().count(9.0) == 0
    instep_rank._element(t, 0).fill_(float("nan"))
    assert torch.isnan(t[0, 0]) and int(torch.isnan(t).sum()) == 1
