"""The filesystem's op log replayed: each move of the pointer at the operation that made it, and what changed under
its target while it named it (chaos.evidence.fs_ops)."""

from __future__ import annotations

import json
from pathlib import Path

from chaos.evidence.fs_ops import Op, pointer_moves, read_ops
from chaos.evidence.pointer import order_of


class Log:
    """Ops in the order they happened: each one's b and e from one counter, as the daemon numbers them."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.seq = 0

    def __call__(self, op: str, path: str, **fields) -> Op:
        self.seq += 2
        o = Op(self.seq - 1, self.seq, self.seq / 100, op, path, fields)
        self.ops.append(o)
        return o

    def commit(self, step: int, files=("shard0.pt", "shard1.pt"), sync: bool = True) -> None:
        """The reference commit: a temporary directory written and fsynced, renamed, then ``latest`` replaced."""
        tmp = f"/.tmp-step_{step}"
        self("mkdir", tmp)
        for f in files:
            self("create", f"{tmp}/{f}")
            self("write", f"{tmp}/{f}", offset=0, size=131072)
            self("write", f"{tmp}/{f}", offset=131072, size=5000)
            if sync:
                self("fsync", f"{tmp}/{f}")
        self("rename", tmp, to=f"/step_{step}")
        self.pointer(f"step_{step}")

    def pointer(self, name: str) -> None:
        self("create", "/.latest.tmp-1")
        self("write", "/.latest.tmp-1", offset=0, size=len(name), head=name)
        self("fsync", "/.latest.tmp-1")
        self("rename", "/.latest.tmp-1", to="/latest")


def test_the_reference_commit_moves_the_pointer_once_per_save_onto_a_finished_synced_directory() -> None:
    log = Log()
    log.commit(10)
    log.commit(20)
    log("rename", "/step_10", to="/.tmp-prune-step_10")   # pruned after latest moved on: not while named
    log("unlink", "/.tmp-prune-step_10/shard0.pt")
    moves = pointer_moves(log.ops, "/latest", "/ckpt")
    assert [(m.name, m.target, m.op.op) for m in moves] == [("step_10", "/step_10", "rename"),
                                                           ("step_20", "/step_20", "rename")]
    assert moves[0].until == moves[1].op.e and moves[1].until is None
    assert all(not m.changed and not m.unsynced for m in moves)


def test_a_pointer_moved_before_the_last_write_is_caught_however_soon_the_write_ends() -> None:
    log = Log()
    log("mkdir", "/step_10")
    log("create", "/step_10/shard0.pt")
    log("write", "/step_10/shard0.pt", offset=0, size=131072)
    log.pointer("step_10")
    late = log("write", "/step_10/shard0.pt", offset=131072, size=5000)
    [move] = pointer_moves(log.ops, "/latest", "/ckpt")
    assert move.changed == [late]
    assert move.unsynced == ["/step_10/shard0.pt"]


def test_a_write_that_overlaps_the_move_counts_as_after_it() -> None:
    """b before the move's e, e after its b: the two ran at once, so the target was not finished when it was named."""
    log = Log()
    log("mkdir", "/step_10")
    log.pointer("step_10")
    move_op = log.ops[-1]
    overlapping = Op(move_op.b - 1, move_op.e + 1, move_op.t, "write", "/step_10/x", {"offset": 0, "size": 9})
    ops = sorted([*log.ops, overlapping], key=lambda o: o.e)
    [move] = pointer_moves(ops, "/latest", "/ckpt")
    assert move.changed == [overlapping]
    finished_first = Op(move_op.b - 3, move_op.b - 2, move_op.t, "write", "/step_10/x", {"offset": 0, "size": 9})
    [move] = pointer_moves(sorted([*log.ops, finished_first], key=lambda o: o.e), "/latest", "/ckpt")
    assert move.changed == []


def test_a_slot_rewritten_after_the_pointer_left_it_is_no_change_of_a_named_target() -> None:
    log = Log()
    log.commit(0, files=("a",))
    log("rename", "/step_0", to="/slot0")
    log.pointer("slot0")
    log("mkdir", "/slot1")
    log("create", "/slot1/a")
    log.pointer("slot1")
    log("truncate", "/slot0/a", length=0)   # slot0 reused once latest names slot1
    log("write", "/slot0/a", offset=0, size=10)
    moves = [m for m in pointer_moves(log.ops, "/latest", "/ckpt") if m.name.startswith("slot")]
    assert [(m.name, len(m.changed)) for m in moves] == [("slot0", 0), ("slot1", 0)]


def test_a_named_target_renamed_away_or_replaced_is_a_change() -> None:
    log = Log()
    log.commit(10)
    gone = log("rename", "/step_10", to="/.stale-step_10")
    [move] = pointer_moves(log.ops, "/latest", "/ckpt")
    assert move.changed == [gone]
    log2 = Log()
    log2.commit(10)
    log2("mkdir", "/.tmp-again")
    into = log2("rename", "/.tmp-again", to="/step_10")
    [move] = pointer_moves(log2.ops, "/latest", "/ckpt")
    assert move.changed == [into]


def test_symlink_pointers_and_a_checkpoint_written_in_place_as_its_own_pointer() -> None:
    log = Log()
    log("mkdir", "/step_5")
    log("symlink", "/.latest.new", target="/ckpt/step_5")   # absolute: the mount's path on the host
    log("rename", "/.latest.new", to="/latest")
    [move] = pointer_moves(log.ops, "/latest", "/ckpt")
    assert (move.name, move.target) == ("/ckpt/step_5", "/step_5")
    # last.ckpt written by torch.save in place: it names itself from its first write; the rest come after.
    log = Log()
    log("create", "/last.ckpt")
    log("write", "/last.ckpt", offset=0, size=131072)
    rest = log("write", "/last.ckpt", offset=131072, size=131072)
    [move] = pointer_moves(log.ops, "/last.ckpt", "/ckpt")
    assert move.name == "last.ckpt" and move.changed == [rest]
    # The remedy: written beside it and renamed over it whole.
    log = Log()
    log("create", "/.last.ckpt.tmp")
    log("write", "/.last.ckpt.tmp", offset=0, size=131072)
    log("rename", "/.last.ckpt.tmp", to="/last.ckpt")
    [move] = pointer_moves(log.ops, "/last.ckpt", "/ckpt")
    assert move.name == "last.ckpt" and move.changed == []


def test_the_log_reads_whole_or_says_why_not(tmp_path: Path) -> None:
    path = tmp_path / "ops.jsonl"
    good = [{"b": 1, "e": 2, "t": 1.0, "op": "mkdir", "path": "/a"}, {"b": 3, "e": 4, "t": 1.1, "op": "mkdir", "path": "/b"}]
    path.write_text("\n".join(json.dumps(o) for o in good) + '\n{"b": 5, "e"')   # the daemon killed mid-line
    ops, problem = read_ops(path)
    assert problem is None and [o.path for o in ops] == ["/a", "/b"]
    path.write_text(json.dumps(good[0]) + "\nnot json\n" + json.dumps(good[1]) + "\n")
    assert "broken at line 2 of 3" in (read_ops(path)[1] or "")
    path.write_text(json.dumps({**good[0], "b": 9}) + "\n")
    assert "ends before it begins" in (read_ops(path)[1] or "")
    assert "cannot be read" in (read_ops(tmp_path / "missing")[1] or "")
    record = order_of(tmp_path / "missing", "latest", tmp_path)
    assert record["error"] and "moves" not in record


def test_the_order_record_lists_each_move_with_its_first_changes(tmp_path: Path) -> None:
    log = Log()
    log("mkdir", "/step_10")
    log.pointer("step_10")
    for i in range(8):
        log("write", "/step_10/shard0.pt", offset=i * 10, size=10)
    path = tmp_path / "ops.jsonl"
    path.write_text("".join(json.dumps({"b": o.b, "e": o.e, "t": o.t, "op": o.op, "path": o.path, **o.fields}) + "\n"
                            for o in log.ops))
    record = order_of(path, "latest", Path("/ckpt"))
    [move] = record["moves"]
    assert move["name"] == "step_10" and move["changed"] == 8 and len(move["changes"]) == 5
    assert move["changes"][0] == {"op": "write", "path": "/step_10/shard0.pt", "t": log.ops[-8].t}


def test_a_pointer_written_in_pieces_or_rewritten_in_place_is_read_as_its_text() -> None:
    """`latest` written as the name and then a newline, and rewritten in place at the next save: two moves, onto
    the two steps, and the rewrite is no change under either (a review found a phantom move to `latest` itself)."""
    log = Log()
    for step in (10, 20):
        log("mkdir", f"/step_{step}")
    log("create", "/latest")
    log("write", "/latest", offset=0, size=7, head="step_10")
    log("write", "/latest", offset=7, size=1, head="\n")
    log("truncate", "/latest", length=0)
    log("write", "/latest", offset=0, size=7, head="step_20")
    log("write", "/latest", offset=7, size=1, head="\n")
    moves = pointer_moves(log.ops, "/latest", "/ckpt")
    assert [(m.name, m.target, len(m.changed)) for m in moves] == [("step_10", "/step_10", 0), ("step_20", "/step_20", 0)]


def test_changes_through_another_name_of_the_targets_files_are_changes() -> None:
    log = Log()
    log("mkdir", "/stage")
    log("create", "/stage/state.pt")
    log("mkdir", "/step_10")
    log("link", "/stage/state.pt", to="/step_10/state.pt")   # one inode, two names
    log.pointer("step_10")
    alias = log("write", "/stage/state.pt", offset=0, size=131072)
    [move] = pointer_moves(log.ops, "/latest", "/ckpt")
    assert move.changed == [alias]
    # A symlinked directory: `latest` names `current`, which links to step_10; the kernel resolves the link, so the
    # writes name step_10's real path.
    log = Log()
    log("mkdir", "/step_10")
    log("symlink", "/current", target="step_10")
    log.pointer("current")
    late = log("write", "/step_10/state.pt", offset=0, size=131072)
    [move] = [m for m in pointer_moves(log.ops, "/latest", "/ckpt") if m.name == "current"]
    assert move.target == "/step_10" and move.changed == [late]


def test_names_are_placed_in_the_mount_however_the_host_spells_its_path() -> None:
    log = Log()
    log("mkdir", "/step_10")
    log("symlink", "/latest", target="/real/runs/ckpt/step_10")   # the mount's resolved path (/runs is a link)
    log("write", "/step_10/x", offset=0, size=5)
    [move] = pointer_moves(log.ops, "/latest", ["/runs/ckpt", "/real/runs/ckpt"])
    assert move.target == "/step_10" and len(move.changed) == 1
    log = Log()
    log("mkdir", "/step_10")
    log.pointer("../ckpt/step_10")                                # out of the mount and back into it
    [move] = pointer_moves(log.ops, "/latest", "/runs/x/ckpt")
    assert move.target == "/step_10"
    log = Log()
    log.pointer("../elsewhere/step_10")
    [move] = pointer_moves(log.ops, "/latest", "/runs/x/ckpt")
    assert move.target is None and move.changed == []            # unplaced: the check does not count it as proof


def test_the_harnesss_own_changes_are_not_the_workloads() -> None:
    """A fault that corrupts the named checkpoint through the mount: its write is marked as the harness's."""
    log = Log()
    log.commit(10)
    log("write", "/step_10/shard0.pt", offset=100, size=1, harness=True)
    [move] = pointer_moves(log.ops, "/latest", "/ckpt")
    assert move.changed == []
