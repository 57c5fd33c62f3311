"""The workloads' checkpoint manager in one process: commit, verify, fallback, retention, ENOSPC."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from chaos.checkpoint.manifest import MANIFEST_NAME, verify_manifest
from chaos.sdk import digest_state
from trainkit.checkpoint import CheckpointManager, commit_dir, list_step_dirs, prune, remove_leftovers
from trainkit.data import GlobalCursorSampler, SyntheticDataset
from trainkit.dist import LocalComm
from trainkit.formats import AppState, DdpFormat, clone_tree
from trainkit.model import build_model
from trainkit.rng import seed_rank


class Recorder:
    """Stands in for ``chaos.sdk``: records checkpoint events as ``(ev, fields)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str):
        def record(*args: Any, **kwargs: Any) -> None:
            self.events.append((name, {"args": args, **kwargs}))

        return record

    def names(self) -> list[str]:
        return [name for name, _ in self.events]


class FlakyFormat(DdpFormat):
    """DdpFormat whose rank-local write fails with ``error`` for the first ``failures`` attempts."""

    def __init__(self, failures: int, code: int = errno.ENOSPC) -> None:
        self.failures = failures
        self.code = code
        self.calls = 0

    def write_local(self, staged: Any, directory: Path, rank: int) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            (directory / "partial").write_bytes(b"x" * 10)
            raise OSError(self.code, "simulated " + errno.errorcode[self.code])
        super().write_local(staged, directory, rank)


def make_app(seed: int = 0) -> AppState:
    model = build_model(8, 16, 3, 0.2, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
    seed_rank(seed, 0)
    return AppState(model, optimizer, scheduler, GlobalCursorSampler(40, seed, 4), seed, 0)


def train(app: AppState, steps: int) -> None:
    ds = SyntheticDataset(40, app.seed, in_dim=8, n_classes=3)
    for _ in range(steps):
        batch = app.sampler.next_batch(0, 1)
        x, y = ds.batch(batch.indices)
        F.cross_entropy(app.model(x), y).backward()
        app.optimizer.step()
        app.optimizer.zero_grad()
        app.scheduler.step()


def digest(app: AppState) -> str:
    return digest_state(app.model.state_dict(), app.optimizer.state_dict(), torch.rand(4))


def manager(tmp_path: Path, fmt: Any = None, **kwargs: Any) -> tuple[CheckpointManager, Recorder, list[float]]:
    events, sleeps = Recorder(), []
    mgr = CheckpointManager(tmp_path / "ckpt", fmt or DdpFormat(), LocalComm(), events=events,
                            sleep=sleeps.append, **kwargs)
    return mgr, events, sleeps


def test_save_commits_a_verifiable_step_dir_and_moves_latest(tmp_path: Path) -> None:
    mgr, events, _ = manager(tmp_path)
    app = make_app()
    train(app, 3)
    result = mgr.save(3, app)
    ckpt = tmp_path / "ckpt"
    assert result is not None and result.ok and result.bytes > 0
    assert sorted(p.name for p in ckpt.iterdir()) == ["latest", "step_000003"]
    assert (ckpt / "latest").read_text() == "step_000003"
    assert sorted(p.name for p in (ckpt / "step_000003").iterdir()) == [MANIFEST_NAME, "rng_rank0.pt", "state.pt"]
    assert verify_manifest(ckpt / "step_000003") == []
    manifest = json.loads((ckpt / "step_000003" / MANIFEST_NAME).read_text())
    assert manifest["step"] == 3 and manifest["meta"] == {"world_size": 1, "format": "ddp-torch-save"}
    assert events.names() == ["ckpt_begin", "ckpt_durable", "ckpt_commit"]
    assert events.events[2][1]["bytes"] == result.bytes


def test_resume_restores_everything_so_training_continues_bit_exact(tmp_path: Path) -> None:
    mgr, events, _ = manager(tmp_path)
    app = make_app()
    train(app, 7)  # crosses a StepLR boundary and an epoch (40 samples / 4 = 10 steps)... partly
    mgr.save(7, app)
    train(app, 8)  # past the epoch boundary
    expected = digest(app)
    fresh = make_app()
    mgr2, events2, _ = manager(tmp_path)
    step, path = mgr2.resume(fresh)
    assert step == 7 and path is not None and path.name == "step_000007"
    assert events2.events == [("ckpt_load", {"args": (7, str(path))})]
    train(fresh, 8)
    assert digest(fresh) == expected  # model, optimizer, scheduler, sampler and dropout RNG restored


def test_a_slow_restore_waits_before_each_load_and_not_on_a_fresh_start(tmp_path: Path) -> None:
    """ckpt_read_delay_s: the slowed restore ci/bench/gate_noise.py gates against a baseline (issue 39)."""
    mgr, _, _ = manager(tmp_path)
    mgr.save(3, make_app())
    slow, _, sleeps = manager(tmp_path, read_delay_s=2.5)
    assert slow.resume(make_app())[0] == 3 and sleeps == [2.5]
    fresh, _, sleeps = manager(tmp_path / "empty", read_delay_s=2.5)
    assert fresh.resume(make_app()) == (0, None) and sleeps == []


def test_fresh_start_and_leftovers_are_cleaned(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    (ckpt / ".tmp-step_000010-abcd").mkdir(parents=True)
    (ckpt / ".tmp-step_000010-abcd" / "state.pt").write_bytes(b"torn")
    (ckpt / ".latest.tmp-123").write_bytes(b"x")
    mgr, events, _ = manager(tmp_path)
    assert mgr.resume(make_app()) == (0, None)
    assert events.events == [("ckpt_load", {"args": (0, None)})]
    assert list(ckpt.iterdir()) == []


def test_corrupt_newest_is_rejected_and_the_previous_one_loaded(tmp_path: Path) -> None:
    mgr, _, _ = manager(tmp_path)
    app = make_app()
    train(app, 2)
    mgr.save(2, app)
    at_two = digest_state(app.model.state_dict())
    train(app, 2)
    mgr.save(4, app)
    state = tmp_path / "ckpt" / "step_000004" / "state.pt"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x01
    state.write_bytes(bytes(data))
    (tmp_path / "ckpt" / "step_000009").mkdir()  # no manifest: an abandoned, unsealed directory
    fresh = make_app()
    mgr2, events, _ = manager(tmp_path)
    step, path = mgr2.resume(fresh)
    assert step == 2 and path is not None and path.name == "step_000002"
    assert digest_state(fresh.model.state_dict()) == at_two
    rejects = [fields["args"] for name, fields in events.events if name == "ckpt_reject"]
    assert [Path(p).name for p, _ in rejects] == ["step_000009", "step_000004"]
    assert "no MANIFEST.json" in rejects[0][1] and "state.pt: checksum" in rejects[1][1]


def test_a_checkpoint_of_another_format_is_rejected(tmp_path: Path) -> None:
    mgr, _, _ = manager(tmp_path)
    mgr.save(1, make_app())

    class OtherFormat(DdpFormat):
        name = "dcp"

    mgr2, events, _ = manager(tmp_path, fmt=OtherFormat())
    assert mgr2.resume(make_app()) == (0, None)
    assert events.names() == ["ckpt_reject", "ckpt_load"]
    assert "format 'ddp-torch-save'" in events.events[0][1]["args"][1]


def test_retention_keeps_the_newest_k(tmp_path: Path) -> None:
    mgr, _, _ = manager(tmp_path, keep=2)
    app = make_app()
    for step in (1, 2, 3, 4):
        mgr.save(step, app)
    assert [p.name for _s, p in list_step_dirs(tmp_path / "ckpt")] == ["step_000004", "step_000003"]
    assert not [p for p in (tmp_path / "ckpt").iterdir() if p.name.startswith(".")]


def test_prune_never_touches_a_newer_directory(tmp_path: Path) -> None:
    for step in (1, 2, 3, 9):
        (tmp_path / f"step_{step:06d}").mkdir()
    prune(tmp_path, keep=1, current_step=3)
    assert [p.name for _s, p in list_step_dirs(tmp_path)] == ["step_000009", "step_000003"]


def test_a_stale_step_dir_is_replaced_never_merged(tmp_path: Path) -> None:
    mgr, _, _ = manager(tmp_path)
    stale = tmp_path / "ckpt" / "step_000005"
    stale.mkdir(parents=True)
    (stale / "from_an_abandoned_timeline.pt").write_bytes(b"old")
    mgr.save(5, make_app())
    assert sorted(p.name for p in stale.iterdir()) == [MANIFEST_NAME, "rng_rank0.pt", "state.pt"]
    assert verify_manifest(stale) == []


def test_enospc_is_retried_with_backoff_then_commits(tmp_path: Path) -> None:
    fmt = FlakyFormat(failures=2)
    mgr, events, sleeps = manager(tmp_path, fmt=fmt, retries=3, retry_wait_s=0.1)
    result = mgr.save(3, make_app())
    assert result is not None and result.ok and fmt.calls == 3
    assert sleeps == [0.1, 0.2]
    assert events.names() == ["ckpt_begin", "ckpt_durable", "ckpt_commit"]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["latest", "step_000003"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EROFS])
def test_a_save_that_keeps_failing_is_abandoned_and_the_previous_one_stays(tmp_path: Path, code: int) -> None:
    good, _, _ = manager(tmp_path)
    app = make_app()
    good.save(2, app)
    before = (tmp_path / "ckpt" / "step_000002" / "state.pt").read_bytes()
    fmt = FlakyFormat(failures=99, code=code)
    mgr, events, sleeps = manager(tmp_path, fmt=fmt, retries=3)
    result = mgr.save(4, app)
    assert result is not None and not result.ok and fmt.calls == 3 and len(sleeps) == 2
    assert events.names() == ["ckpt_begin", "ckpt_error"]
    assert errno.errorcode[code] in events.events[1][1]["args"][2]
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["latest", "step_000002"]  # no temp dir left
    assert (ckpt / "latest").read_text() == "step_000002"
    assert (ckpt / "step_000002" / "state.pt").read_bytes() == before
    fmt.failures = 0  # space is back: the next save succeeds
    assert mgr.save(6, app).ok
    assert (ckpt / "latest").read_text() == "step_000006"


def test_a_failed_commit_on_rank0_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import trainkit.checkpoint as ckpt_mod

    real, calls = ckpt_mod.commit_dir, []

    def flaky_commit(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(ckpt_mod, "commit_dir", flaky_commit)
    mgr, events, _ = manager(tmp_path)
    assert mgr.save(1, make_app()).ok and len(calls) == 2
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["latest", "step_000001"]


def test_async_save_stages_a_private_copy_and_commits_in_the_background(tmp_path: Path) -> None:
    mgr, events, _ = manager(tmp_path, async_comm=LocalComm())
    app = make_app()
    train(app, 2)
    expected = digest_state(app.model.state_dict())
    assert mgr.save(2, app) is None
    with torch.no_grad():
        for p in app.model.parameters():
            p.add_(1.0)  # training goes on while the save is in flight
    mgr.wait()
    assert events.names() == ["ckpt_staged", "ckpt_begin", "ckpt_durable", "ckpt_commit"] and mgr.results[-1].ok
    staged = events.events[0][1]
    assert staged["args"] == (2,) and 0 <= staged["seconds"] < 30
    fresh = make_app()
    manager(tmp_path)[0].resume(fresh)
    assert digest_state(fresh.model.state_dict()) == expected


def test_clone_tree_copies_tensors_and_keeps_structure() -> None:
    t = torch.ones(3)
    tree = {"a": [t, (t, 1)], "b": "x"}
    copy = clone_tree(tree)
    t.add_(1)
    assert copy["a"][0].tolist() == [1.0, 1.0, 1.0] and isinstance(copy["a"][1], tuple) and copy["b"] == "x"


def test_commit_dir_and_remove_leftovers_directly(tmp_path: Path) -> None:
    tmp = tmp_path / ".tmp-step_000001-aa"
    tmp.mkdir()
    (tmp / "a.bin").write_bytes(b"abc")
    assert commit_dir(tmp, tmp_path / "step_000001", 1, format="x") == 3
    assert (tmp_path / "latest").read_text() == "step_000001" and not tmp.exists()
    (tmp_path / ".tmp-junk").write_bytes(b"")
    assert [p.name for p in remove_leftovers(tmp_path)] == [".tmp-junk"]


def test_resume_from_a_read_only_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mgr, _, _ = manager(tmp_path)
    mgr.save(2, make_app())
    (tmp_path / "ckpt" / ".tmp-step_000004-ff").mkdir()
    (tmp_path / "ckpt" / ".latest.tmp-1").write_bytes(b"x")

    def read_only(self: Path, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "unlink", read_only)
    monkeypatch.setattr("shutil.rmtree", lambda *a, **k: None)
    mgr2, events, _ = manager(tmp_path)
    step, path = mgr2.resume(make_app())
    assert step == 2 and path is not None  # leftovers could not be deleted; resume goes on
    assert (tmp_path / "ckpt" / ".latest.tmp-1").exists()


def test_ckpt_durable_comes_when_every_file_is_written_and_before_anything_names_them(tmp_path: Path) -> None:
    """The phase a kill strikes to prove that data on disk without a commit record is never selected."""
    seen: dict[str, Any] = {}

    class AtDurable(Recorder):
        def __getattr__(self, name: str):
            record = super().__getattr__(name)
            if name != "ckpt_durable":
                return record

            def look(step: int, path: str) -> None:
                record(step, path)
                if step != 4:
                    return
                seen["files"] = sorted(p.name for p in Path(path).iterdir())
                seen["latest"] = (tmp_path / "ckpt" / "latest").read_text()
                seen["entries"] = sorted(p.name for p in (tmp_path / "ckpt").iterdir() if not p.name.startswith("."))

            return look

    events = AtDurable()
    mgr = CheckpointManager(tmp_path / "ckpt", DdpFormat(), LocalComm(), events=events, commit_delay_s=0.05)
    app = make_app()
    mgr.save(2, app)
    t0 = time.monotonic()
    mgr.save(4, app)
    assert time.monotonic() - t0 >= 0.05  # the commit waited the delay after the data was durable
    assert events.names() == ["ckpt_begin", "ckpt_durable", "ckpt_commit"] * 2
    durable = events.events[4][1]
    assert durable["args"][0] == 4 and ".tmp-step_000004-" in durable["args"][1]
    assert seen["files"] == ["rng_rank0.pt", "state.pt"]  # the data, and no MANIFEST.json yet
    assert seen["latest"] == "step_000002" and seen["entries"] == ["latest", "step_000002"]
