"""The witness: a child process verifies each committed or loaded checkpoint and its verdict lands in the history."""

from __future__ import annotations

from pathlib import Path

from chaos.checkpoint.manifest import build_manifest, write_manifest
from chaos.evidence import witness as witness_module
from chaos.evidence.witness import CheckpointWitness


def sealed(path: Path, step: int) -> Path:
    path.mkdir(parents=True)
    (path / "shard.bin").write_bytes(bytes(range(256)) * 64)
    write_manifest(path, build_manifest(path, step, format="test"))
    return path


def event(ev: str, path: Path, attempt: str = "0.0", step: int = 10, rank: int = 0) -> dict:
    return {"ev": ev, "t": 1.0, "path": str(path), "step": step, "attempt": attempt, "rank": rank}


def test_each_look_is_logged_with_its_verdict(tmp_path: Path) -> None:
    logged: list[dict] = []
    good = sealed(tmp_path / "step_000010", 10)
    torn = sealed(tmp_path / "step_000020", 20)
    (torn / "shard.bin").write_bytes(b"torn")
    witness = CheckpointWitness(lambda ev, **fields: logged.append({"ev": ev, **fields}))
    witness.observe([event("ckpt_commit", good), event("ckpt_commit", torn, step=20),
                     event("ckpt_load", good, attempt="0.1"), event("ckpt_load", good, attempt="0.1", rank=1),
                     event("ckpt_load", tmp_path / "step_000030", attempt="0.1", step=30),
                     {"ev": "ckpt_commit", "path": str(good), "source": "harness"}])
    child = witness._child
    witness.close()
    assert child is not None and child.alive()  # kept for the next run of this process
    by_key = {(r["seen"], Path(r["path"]).name, r["attempt"]): r for r in logged}
    # Two ranks reporting the same load get one look; a harness record is not a workload event.
    assert len(logged) == 4 and all(r["ev"] == "ckpt_verify" for r in logged)
    assert by_key[("ckpt_commit", "step_000010", "0.0")]["ok"] is True
    torn_look = by_key[("ckpt_commit", "step_000020", "0.0")]
    assert torn_look["ok"] is False and torn_look["problems"]
    gone = by_key[("ckpt_load", "step_000030", "0.1")]
    assert gone["ok"] is None and gone["gone"] is True
    assert by_key[("ckpt_load", "step_000010", "0.1")]["t_event"] == 1.0


def test_a_run_without_checkpoints_starts_no_child() -> None:
    witness = CheckpointWitness(lambda *a, **k: None)
    witness.observe([{"ev": "step", "step": 1}])
    witness.close()
    assert witness._child is None


def test_a_checkpoint_pruned_while_it_is_read_is_gone_not_broken(tmp_path: Path) -> None:
    from chaos.checkpoint.verify import verify
    from chaos.evidence.witness import look

    path = sealed(tmp_path / "step_000010", 10)

    def verify_while_pruned(p: Path, load: bool = False):
        report = verify(p, load=load)
        return report

    def prune_midway(p: Path, load: bool = False):
        (p / "shard.bin").unlink()  # what a reader sees when retention takes the directory mid-read
        report = verify(p, load=load)
        p.rename(tmp_path / ".tmp-prune-step_000010")
        return report

    assert look({"path": str(path)}, verify_while_pruned)["ok"] is True
    result = look({"path": str(path)}, prune_midway)
    assert result["ok"] is None and result["gone"] is True and "removed while being verified" in result["problems"][0]
    # Still there and broken: that is a broken checkpoint, whoever broke it.
    broken = sealed(tmp_path / "step_000020", 20)
    (broken / "shard.bin").write_bytes(b"torn")
    assert look({"path": str(broken)})["ok"] is False


def test_a_pinned_checkpoint_is_judged_even_after_retention_removed_it(tmp_path: Path) -> None:
    """The look may come seconds after the commit; the pin, made when the request arrives, keeps the files."""
    import shutil

    from chaos.evidence.witness import look, pin

    good = sealed(tmp_path / "ckpt" / "step_000010", 10)
    pinned = pin(good, tmp_path / "pins")
    assert pinned is not None and pinned.name == "step_000010"
    shutil.rmtree(good)  # retention prunes it before the look
    fields = look({"path": str(good), "step": 10}, pinned=pinned)
    assert fields["ok"] is True and fields["pinned"] is True and fields["gone"] is False
    # Without a pin the same look says gone, never intact.
    assert look({"path": str(good), "step": 10})["ok"] is None


def test_a_torn_checkpoint_stays_torn_when_pinned(tmp_path: Path) -> None:
    from chaos.evidence.witness import look, pin

    torn = sealed(tmp_path / "ckpt" / "step_000020", 20)
    (torn / "shard.bin").write_bytes(b"torn")
    fields = look({"path": str(torn), "step": 20}, pinned=pin(torn, tmp_path / "pins"))
    assert fields["ok"] is False and fields["problems"]


def test_nothing_is_pinned_from_another_filesystem_or_a_missing_path(tmp_path: Path) -> None:
    from chaos.evidence.witness import pin

    assert pin(tmp_path / "missing", tmp_path / "pins") is None
    assert pin(Path("/proc/self/status"), tmp_path / "pins") is None  # procfs: not the run's filesystem


def test_the_child_pins_on_arrival_and_leaves_no_pins(tmp_path: Path) -> None:
    logged: list[dict] = []
    good = sealed(tmp_path / "ckpt" / "step_000010", 10)
    witness = CheckpointWitness(lambda ev, **fields: logged.append({"ev": ev, **fields}), pin_dir=tmp_path / "pins")
    witness.observe([event("ckpt_commit", good)])
    witness.close()
    [rec] = logged
    assert rec["ok"] is True and rec["pinned"] is True and "pin_dir" not in rec
    assert not (tmp_path / "pins").exists()


def test_a_pin_missing_files_of_a_checkpoint_deleted_meanwhile_is_gone_not_torn(tmp_path: Path) -> None:
    """A prune that deletes in place, caught half-way by the pin: no false 'invalid'."""
    import shutil

    from chaos.evidence.witness import look, pin

    ckpt = sealed(tmp_path / "ckpt" / "step_000010", 10)
    (ckpt / "shard.bin").unlink()  # the prune has begun
    pinned = pin(ckpt, tmp_path / "pins")
    shutil.rmtree(ckpt)  # and finished before the look
    fields = look({"path": str(ckpt), "step": 10}, pinned=pinned)
    assert fields["ok"] is None and fields["gone"] is True


def test_runs_one_after_another_share_one_child_and_each_gets_only_its_own_looks(tmp_path: Path) -> None:
    """The torch import is paid once per harness process: the second run's looks go to the same child, and each
    run's log receives its own answers only. The child ends with its input."""
    logs: dict[str, list[dict]] = {"a": [], "b": []}
    firsts = []
    for name, step in (("a", 10), ("b", 20)):
        ckpt = sealed(tmp_path / name / f"step_{step:06d}", step)
        w = CheckpointWitness(lambda ev, _n=name, **fields: logs[_n].append({"ev": ev, **fields}),
                              pin_dir=tmp_path / name / "pins")
        w.observe([event("ckpt_commit", ckpt, step=step)])
        w.close()
        firsts.append(w._child)
        assert not (tmp_path / name / "pins").exists()
    assert firsts[0] is firsts[1] and firsts[0].proc.pid == firsts[1].proc.pid
    assert [(r["step"], r["ok"]) for r in logs["a"]] == [(10, True)]
    assert [(r["step"], r["ok"]) for r in logs["b"]] == [(20, True)]
    assert all("rid" not in r for r in logs["a"] + logs["b"])
    assert witness_module.shutdown() == 0


def test_a_child_that_dies_owes_its_looks_as_unavailable_and_the_next_run_gets_a_new_one(tmp_path: Path) -> None:
    logged: list[dict] = []
    w = CheckpointWitness(lambda ev, **fields: logged.append({"ev": ev, **fields}))
    w.start()
    dead = w._child
    dead.proc.kill()
    dead.proc.wait()
    dead.reader.join(timeout=10)
    w.observe([event("ckpt_commit", sealed(tmp_path / "step_000010", 10))])
    w.close()
    [rec] = logged
    assert rec["ok"] is True  # sent to a new child, not lost
    assert w._child is not dead
    witness_module.shutdown()
