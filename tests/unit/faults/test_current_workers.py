"""Which live workers a rank selector sees: the newest round of the job, or each replica group's own newest."""

from __future__ import annotations

from types import SimpleNamespace

from chaos.faults.kill_rank import current_workers
from chaos.runtime.processes import Worker


def _worker(pid: int, node: str, generation: int, rank: int = 0) -> Worker:
    return Worker(pid=pid, create_time=0.0, rank=rank, local_rank=rank, restart_count=0, node=node,
                  generation=generation)


def _run(workers: list[Worker], independent: bool) -> SimpleNamespace:
    target = SimpleNamespace(workers=lambda run: workers, independent_worlds=independent)
    return SimpleNamespace(target=target)


def test_replica_groups_each_keep_their_newest_process() -> None:
    # rg0's first process (generation 1) still trains; rg1's was relaunched (generation 3 replaced 2).
    live = [_worker(10, "rg0", 1), _worker(12, "rg1", 3)]
    assert [w.pid for w in current_workers(_run(live, independent=True))] == [10, 12]
    assert [w.pid for w in current_workers(_run(live, independent=True), "rg0")] == [10]


def test_one_world_keeps_only_its_newest_round() -> None:
    # A leftover of an older round (generation 1) is not a rank of the job's current round (generation 2).
    live = [_worker(10, "node0", 1), _worker(20, "node0", 2), _worker(21, "node1", 2, rank=1)]
    assert [w.pid for w in current_workers(_run(live, independent=False))] == [20, 21]
