"""chaos.sdk: one whole JSON line per event, flushed as written, per process; nothing without the environment."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from chaos import sdk


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("CHAOS_LAUNCH", "0")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(str(tmp_path / "events"), host="h"))
    return tmp_path / "events"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(path.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_records_carry_the_protocol_fields_and_are_on_disk_at_once(events: Path) -> None:
    sdk.start(dataset_size=10, device="cpu")
    sdk.step(3, epoch=0, samples=[torch.tensor(4), 5], loss=torch.tensor(0.5).item())
    # Read back without closing anything: each line is already written (a SIGKILL now loses nothing).
    start, step = lines(events)
    assert (events / f"h-{os.getpid()}.jsonl").exists()
    for rec in (start, step):
        assert {"ev", "t", "mono", "pid", "host", "rank", "world_size", "attempt"} <= rec.keys()
        assert rec["rank"] == 1 and rec["world_size"] == 2 and rec["attempt"] == "0.2"
    assert step["samples"] == [4, 5] and step["step"] == 3 and step["loss"] == 0.5


def test_a_start_in_the_same_process_reads_its_rank_and_world_size_again(events: Path, monkeypatch) -> None:
    """NVRx's in-process restart gives a process another rank and world size (the ranks left after one was ended)."""
    sdk.start(dataset_size=10, device="cpu")
    sdk.step(1, epoch=0, samples=[1], loss=0.5)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    sdk.step(2, epoch=0, samples=[2], loss=0.5)  # the same training: what it said at its start still holds
    sdk.start(dataset_size=10, device="cpu")
    sdk.step(2, epoch=0, samples=[2, 3], loss=0.5)
    assert [(r["ev"], r["rank"], r["world_size"]) for r in lines(events)] == [
        ("start", 1, 2), ("step", 1, 2), ("step", 1, 2), ("start", 0, 1), ("step", 0, 1)]


@pytest.mark.parametrize("agent_store, written", [("False", "10.1.2.3:4567"), ("True", None), (None, None)])
def test_a_start_names_its_rounds_store_only_where_each_round_has_its_own(events: Path, monkeypatch, agent_store,
                                                                          written) -> None:
    """torchrun's shared agent store has one address for every round: no round is named then."""
    monkeypatch.setenv("MASTER_ADDR", "10.1.2.3")
    monkeypatch.setenv("MASTER_PORT", "4567")
    if agent_store is None:
        monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    else:
        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", agent_store)
    sdk.start(dataset_size=10, device="cpu", rdzv_store="a caller's:1")
    assert lines(events)[0].get("rdzv_store") == written


def test_a_forked_child_writes_its_own_file(events: Path) -> None:
    sdk.step(1, epoch=0, samples=(1,), loss=1.0)
    pid = os.fork()
    if pid == 0:
        sdk.step(2, epoch=0, samples=(2,), loss=1.0)
        os._exit(0)
    os.waitpid(pid, 0)
    files = sorted(events.glob("*.jsonl"))
    assert len(files) == 2
    assert sorted(rec["pid"] for rec in lines(events)) == sorted([os.getpid(), pid])


def test_without_the_environment_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(None))
    sdk.step(1, epoch=0, samples=[1], loss=1.0)
    assert not sdk.enabled() and not list(tmp_path.iterdir())


def test_digest_is_bit_exact_and_order_independent() -> None:
    a = {"w": torch.arange(4.0), "b": torch.zeros(2, dtype=torch.bfloat16)}
    b = {"b": torch.zeros(2, dtype=torch.bfloat16), "w": torch.arange(4.0)}
    assert sdk.digest_state(a) == sdk.digest_state(b)
    b["w"][0] = torch.nextafter(torch.tensor(0.0), torch.tensor(1.0))
    assert sdk.digest_state(a) != sdk.digest_state(b)


def _trained(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(2, 4)).sum().backward()  # seeded inputs: the gradients, so Adam's moments, differ by seed
    optim.step()
    return model, optim


def test_digest_of_model_and_optimizer_objects_follows_their_weights() -> None:
    """``digest_state(model, optimizer)`` once hashed their repr(): any two Linear(4, 3) + Adam agreed."""
    model, optim = _trained(0)
    same_model, same_optim = _trained(0)
    assert sdk.digest_state(model, optim) == sdk.digest_state(same_model, same_optim)
    assert sdk.digest_state(model, optim) == sdk.digest_state(model.state_dict(), optim.state_dict())
    other_model, other_optim = _trained(1)
    assert sdk.digest_state(model, optim) != sdk.digest_state(other_model, optim)
    assert sdk.digest_state(model, optim) != sdk.digest_state(model, other_optim)  # moments differ
    with torch.no_grad():
        same_model.weight[1, 2] += 1e-6
    assert sdk.digest_state(model, optim) != sdk.digest_state(same_model, optim)


def test_digest_of_a_large_numpy_array_reads_every_element() -> None:
    """Over 1000 elements numpy prints a summary ("0., 0., ..., 0."): a middle element must still count."""
    np = pytest.importorskip("numpy")
    a = np.zeros(100_000, dtype=np.float32)
    b = a.copy()
    b[50_000] = 1.0
    assert sdk.digest_state({"w": a}) == sdk.digest_state({"w": a.copy()})
    assert sdk.digest_state({"w": a}) != sdk.digest_state({"w": b})
    assert sdk.digest_state(a.reshape(200, 500)) != sdk.digest_state(a.reshape(500, 200))  # shape counts
    assert sdk.digest_state(a) != sdk.digest_state(a.astype(np.float64))  # so does the dtype


def test_digest_tells_types_and_keys_apart() -> None:
    assert sdk.digest_state({1: 0}) != sdk.digest_state({"1": 0})
    assert sdk.digest_state([1]) != sdk.digest_state([1.0]) != sdk.digest_state([True])
    assert sdk.digest_state(["ab", "c"]) != sdk.digest_state(["a", "bc"])
    assert sdk.digest_state(None) != sdk.digest_state("None") != sdk.digest_state(b"None")
    # A checkpoint format that stores Adam's betas as a list must not change a correct resume's digest.
    assert sdk.digest_state({"betas": (0.9, 0.999)}) == sdk.digest_state({"betas": [0.9, 0.999]})
    assert sdk.digest_state({0: 1, "b": 2, 1: 3}) == sdk.digest_state({1: 3, "b": 2, 0: 1})


class _Opaque:
    def __init__(self, w: list[float]) -> None:
        self.w = w


def test_digest_refuses_what_it_cannot_hash_and_says_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"cannot hash a value of type .*_Opaque \(at argument 1\['cfg'\]\).*"
                                        r"state_dict\(\)"):
        sdk.digest_state({"w": torch.ones(2)}, {"cfg": _Opaque([1.0])})
    with pytest.raises(TypeError, match=r"type set \(at argument 0\[0\]\)"):
        sdk.digest_state([{1, 2}])


def test_the_sdk_still_imports_neither_torch_nor_numpy() -> None:
    import subprocess
    import sys

    probe = "import sys, chaos.sdk; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr


def test_a_held_step_waits_until_the_harness_releases_it(tmp_path, monkeypatch) -> None:
    """Issue 39: an at_step fault lands at its step; the rank waits after reporting it, boundedly."""
    import threading
    import time

    events = tmp_path / "events"
    (tmp_path / sdk.HOLDS_DIR).mkdir()
    hold = tmp_path / sdk.HOLDS_DIR / "step-3"
    hold.touch()
    monkeypatch.setenv(sdk.RUN_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(sdk, "_holds", [])
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(str(events)))
    t0 = time.monotonic()
    sdk.step(2, epoch=0, samples=[1], loss=0.5)  # not held
    assert time.monotonic() - t0 < 0.5
    threading.Timer(0.3, hold.unlink).start()
    t0 = time.monotonic()
    sdk.step(3, epoch=0, samples=[2], loss=0.4)
    assert 0.25 <= time.monotonic() - t0 < 5
    hold.touch()
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(None))  # writing no events: the harness sees no step
    t0 = time.monotonic()
    sdk.step(3, epoch=0, samples=[2], loss=0.4)
    assert time.monotonic() - t0 < 0.5
    monkeypatch.setattr(sdk, "_writer", sdk.EventWriter(str(events)))
    monkeypatch.setattr(sdk, "HOLD_MAX_S", 0.2)  # a harness that died holding it: the rank goes on
    t0 = time.monotonic()
    sdk.step(3, epoch=0, samples=[2], loss=0.4)
    assert 0.15 <= time.monotonic() - t0 < 2
