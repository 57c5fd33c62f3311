"""The run's process tree: workers are found under the launcher (grandchildren too), identified by
their torchelastic environment, and a reused PID or a not-yet-exec'd child is never misread."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from chaos.runtime import processes
from chaos.runtime.processes import ProcessTree

# A stand-in agent: spawns two "workers" with torchelastic's variables and a non-worker helper.
AGENT = r"""
import os, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         env={**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "TORCHELASTIC_RESTART_COUNT": "2"})
        for r in range(2)]
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture(params=["proc-children", "psutil"])
def agent(request, monkeypatch):
    if request.param == "proc-children" and not processes.PROC_CHILDREN:
        pytest.skip("this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)")
    monkeypatch.setattr(processes, "PROC_CHILDREN", request.param == "proc-children")
    proc = subprocess.Popen([sys.executable, "-c", AGENT], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    os.killpg(proc.pid, 9)
    proc.wait()


def test_workers_are_the_descendants_with_a_torchelastic_rank(agent) -> None:
    tree = ProcessTree()
    tree.add_root("local", agent.pid)
    workers = tree.workers()
    assert sorted(w.rank for w in workers) == [0, 1]
    assert {w.restart_count for w in workers} == {2} and {w.node for w in workers} == {"local"}
    assert len(tree.processes()) == 4  # the agent, two workers, the helper
    assert tree.workers() == workers  # read again from the cache: same answer
    victim = workers[0]
    assert tree.owns(victim.pid, victim.create_time)
    assert not tree.owns(victim.pid, victim.create_time - 5)  # same pid, another process
    os.kill(victim.pid, 9)
    deadline = time.monotonic() + 10
    while victim.pid in {w.pid for w in tree.workers()} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [w.rank for w in tree.workers()] == [1 - victim.rank]


def test_a_nodes_earlier_root_stays_while_it_runs(agent) -> None:
    """A pod evicted from an unreachable node trains on beside its replacement: both agents are the node's. A second
    root must not hide the first one's workers (they would be reported gone while they train), a dead root goes,
    and the same process added again is one root."""
    tree = ProcessTree()
    tree.add_root("node1", agent.pid)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        tree.add_root("node1", other.pid)
        assert sorted(w.rank for w in tree.workers()) == [0, 1]  # the first agent's workers are still seen
        tree.add_root("node1", other.pid)
        assert [r.pid for r in tree.roots["node1"]] == [agent.pid, other.pid]
        agent.kill()  # the agent alone: its workers are the fixture's to end
        agent.wait()
        tree.add_root("node1", other.pid)
        assert [r.pid for r in tree.roots["node1"]] == [other.pid]
        # A root that ended but was not reaped yet (a zombie) is gone too: psutil still calls it running.
        other.kill()
        deadline = time.monotonic() + 10
        while psutil.Process(other.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.02)
        third = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        try:
            tree.add_root("node1", third.pid)
            assert [r.pid for r in tree.roots["node1"]] == [third.pid]
        finally:
            third.kill()
            third.wait()
    finally:
        other.kill()
        other.wait()


def test_a_young_process_without_a_rank_is_looked_at_again(monkeypatch) -> None:
    """Between fork and exec a worker still has its parent's environment: that must not stick."""
    tree = ProcessTree()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ps = __import__("psutil").Process(proc.pid)
        assert tree._identify("local", ps) is None
        assert (ps.pid, ps.create_time()) not in tree._seen  # young: not remembered as "not a worker"
        monkeypatch.setattr(processes, "NEGATIVE_CACHE_AFTER_S", 0.0)
        assert tree._identify("local", ps) is None
        assert tree._seen[(ps.pid, ps.create_time())] is None
    finally:
        proc.kill()
        proc.wait()


def test_rounds_are_numbered_by_what_is_alive() -> None:
    """A worker that appears while a worker of the current round lives joins it; one that appears
    after the whole round is gone starts the next (how torchrun's rounds follow each other)."""
    from chaos.runtime.processes import Worker

    tree = ProcessTree()

    def w(pid: int, restart: int) -> Worker:
        return Worker(pid=pid, create_time=float(pid), rank=pid % 2, local_rank=0, restart_count=restart, node="n")

    first = tree._number_rounds([w(10, 0), w(11, 0)])
    assert [x.generation for x in first] == [1, 1]
    # Rank 1 of round 1 died; its replacement cannot appear before rank 0 is gone too, but if it
    # does (a launcher that overlaps rounds) it joins the live round rather than invent a new one.
    assert [x.generation for x in tree._number_rounds([first[0], w(21, 1)])] == [1, 1]
    # Everything of round 1 gone: the next workers are round 2, whatever restart count they report.
    second = tree._number_rounds([w(30, 0), w(31, 1)])
    assert [x.generation for x in second] == [2, 2]
    assert tree._number_rounds(second) == second, "a known worker keeps its round"


def test_independent_nodes_number_their_rounds_apart() -> None:
    """Replica groups of a drop-replica job (target torchft) restart alone: rg1's new worker, appearing while rg0's
    first one lives, starts rg1's next round and leaves rg0's round (and its attempt label) alone."""
    from chaos.runtime.processes import Worker

    tree = ProcessTree()
    tree.independent_nodes = True

    def w(pid: int, node: str) -> Worker:
        return Worker(pid=pid, create_time=float(pid), rank=0, local_rank=0, restart_count=0, node=node)

    first = tree._number_rounds([w(10, "rg0")])
    both = tree._number_rounds([first[0], w(20, "rg1")])
    assert [x.generation for x in both] == [1, 2]
    again = tree._number_rounds([both[0], w(21, "rg1")])
    assert [x.generation for x in again] == [1, 3], "rg1's replacement is rg1's next round; rg0 keeps round 1"


def _ready(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_zombie_has_exited_and_a_reused_pid_is_not_the_process() -> None:
    import psutil

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    handle = psutil.Process(proc.pid)
    deadline = time.monotonic() + 30
    while handle.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:  # ended, not yet reaped
        time.sleep(0.01)
    assert processes.exited(handle)
    assert proc.wait() == 0  # not reaped behind the Popen's back: its exit status is still there
    assert processes.exited(handle)  # gone


def test_stop_processes_ends_one_that_ignores_sigterm_after_the_grace() -> None:
    import psutil

    proc = _ready("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
                  "time.sleep(60)")
    handle = psutil.Process(proc.pid)
    assert processes.wait_exited([handle], 0.2) == [handle]  # still running at the timeout: returned
    processes.stop_processes([handle], grace_s=0.3)
    assert processes.exited(handle)
    assert proc.wait(timeout=5) == -9  # SIGTERM ignored, so SIGKILL; the status is the Popen's to read


def test_an_orphan_killed_with_its_parent_counts_as_ended_before_init_reaps_it() -> None:
    import psutil

    # A worker whose agent dies with it: reparented to init, which reaps it when it gets to it.
    proc = _ready("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; "
                  "time.sleep(60)']); print('ready', flush=True); print(c.pid, flush=True); time.sleep(60)")
    child = psutil.Process(int(proc.stdout.readline()))
    processes.stop_processes([psutil.Process(proc.pid), child], grace_s=5)
    assert processes.exited(child) and processes.exited(psutil.Process(proc.pid))
    assert proc.wait(timeout=5) == -15


# A worker's daemon the way NVRx's in-process monitor starts one: forked twice, the middle process gone at once, so
# the daemon (RANK inherited) is reparented to init. The tree walk can list it just before that happens.
DAEMON = r"""
import os, sys, time
if os.fork() == 0:
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        time.sleep(60)
    os._exit(0)
os.wait()
"""


def test_a_daemon_that_left_the_tree_is_not_a_worker(agent, monkeypatch) -> None:
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "2"}
    starter = subprocess.Popen([sys.executable, "-c", DAEMON], env=env, stdout=subprocess.PIPE, text=True)
    daemon = int(starter.stdout.readline())
    starter.wait()
    try:
        tree = ProcessTree()
        tree.add_root("local", agent.pid)
        walked = tree.processes
        # The walk lists the daemon among the run's processes, as it did while its parent still lived.
        monkeypatch.setattr(tree, "processes", lambda: [*walked(), ("local", psutil.Process(daemon))])
        assert psutil.Process(daemon).ppid() not in {p.pid for _n, p in walked()}
        time.sleep(processes.NEGATIVE_CACHE_AFTER_S)
        workers = tree.workers()
        assert sorted(w.rank for w in workers) == [0, 1] and daemon not in {w.pid for w in workers}
    finally:
        os.kill(daemon, 9)
