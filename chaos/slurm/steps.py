"""Reaching the job's ranks on nodes the harness cannot see: ``srun --overlap --jobid`` steps.

On a user's cluster (``cluster: existing``) the ranks run on compute nodes; there is no ssh and no
process tree to walk from the submit host. A fault therefore runs a short step inside the job's
own allocation (``--overlap`` shares its CPUs, so it is scheduled at once) that executes this
module on the node:

``python -m chaos.slurm.steps list RUN_DIR``
    one JSON line per training worker of the run on this node (the process tree's identification:
    torchelastic's RANK and restart count in its environment, and the run's CHAOS_RUN_DIR, so a
    worker of another job or run is never listed);
``... signal RUN_DIR SIGNAL PID:CREATE_TIME...``
    send a signal to those workers, each re-checked to be the same process of this run first (a
    PID reused between the list and the signal is refused, not hit);
``... duty RUN_DIR PID:CREATE_TIME STOPPED_S RUNNING_S STOP_FILE``
    the straggler's SIGSTOP/SIGCONT duty cycle, until STOP_FILE exists (on the shared filesystem)
    or the step is signalled; it leaves the process running and prints how many cycles it did.
    A stop file, because srun answers a SIGTERM by killing the step outright.

Only the standard library and psutil run on the node, and the step's stdout is the answer.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any

import psutil

RUN_DIR_ENV = "CHAOS_RUN_DIR"


def _env_int(env: dict[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or os.uname().nodename


def describe(proc: psutil.Process, run_dir: str) -> dict[str, Any] | None:
    """The worker record of ``proc`` if it is a training worker of the run at ``run_dir``."""
    try:
        env = proc.environ()
        if env.get(RUN_DIR_ENV) != run_dir or "TORCHELASTIC_RESTART_COUNT" not in env or "RANK" not in env:
            return None
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return {"pid": proc.pid, "create_time": proc.create_time(), "ppid": proc.ppid(),
                    "rank": _env_int(env, "RANK"), "local_rank": _env_int(env, "LOCAL_RANK"),
                    "restart_count": _env_int(env, "TORCHELASTIC_RESTART_COUNT") or 0,
                    "launch": _env_int(env, "CHAOS_LAUNCH"), "node": node_name(),
                    "chaos_host": env.get("CHAOS_HOST"),
                    "store": f"{env.get('MASTER_ADDR', '')}:{env.get('MASTER_PORT', '')}"}
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def list_workers(run_dir: str) -> list[dict[str, Any]]:
    """The run's workers on this node; a worker's own children (data-loader workers inherit RANK) are left out."""
    found = [w for w in (describe(p, run_dir) for p in psutil.process_iter()) if w is not None]
    pids = {w["pid"] for w in found}
    return [w for w in found if w["ppid"] not in pids]


def _same(run_dir: str, pid: int, create_time: float) -> psutil.Process | None:
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None
    w = describe(proc, run_dir)
    if w is None or abs(w["create_time"] - create_time) > 0.01:
        return None
    return proc


def _targets(run_dir: str, specs: list[str]) -> list[tuple[int, float, psutil.Process | None]]:
    out = []
    for spec in specs:
        pid, _, ctime = spec.partition(":")
        out.append((int(pid), float(ctime), _same(run_dir, int(pid), float(ctime))))
    return out


def send(run_dir: str, signame: str, specs: list[str]) -> dict[str, Any]:
    sig = getattr(signal, signame)
    hit, gone = [], []
    for pid, _ctime, proc in _targets(run_dir, specs):
        if proc is None:
            gone.append(pid)
            continue
        try:
            proc.send_signal(sig)
            hit.append(pid)
        except psutil.NoSuchProcess:
            gone.append(pid)
    return {"node": node_name(), "signal": signame, "hit": hit, "gone": gone}


def duty(run_dir: str, spec: str, stopped_s: float, running_s: float, stop_file: str | None = None) -> dict[str, Any]:
    """SIGSTOP/SIGCONT ``spec`` until ``stop_file`` exists or SIGTERM/SIGINT/SIGHUP arrives."""
    [(pid, _ctime, proc)] = _targets(run_dir, [spec])
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda *_: stop.set())
    cycles = 0
    print(json.dumps({"node": node_name(), "pid": pid, "started": proc is not None}), flush=True)
    try:
        while proc is not None and not stop.is_set() and not (stop_file and os.path.exists(stop_file)):
            proc.send_signal(signal.SIGSTOP)
            if stop.wait(stopped_s):
                break
            proc.send_signal(signal.SIGCONT)
            cycles += 1
            stop.wait(running_s)
    except psutil.NoSuchProcess:
        pass
    finally:
        if proc is not None:
            try:
                proc.send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass
    return {"node": node_name(), "pid": pid, "cycles": cycles}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in {"list", "signal", "duty"}:
        print("usage: python -m chaos.slurm.steps list|signal|duty RUN_DIR ...", file=sys.stderr)
        return 2
    cmd, run_dir, rest = argv[0], argv[1], argv[2:]
    if cmd == "list":
        for w in list_workers(run_dir):
            print(json.dumps(w))
    elif cmd == "signal":
        print(json.dumps(send(run_dir, rest[0], rest[1:])))
    else:
        print(json.dumps(duty(run_dir, rest[0], float(rest[1]), float(rest[2]), rest[3] if len(rest) > 3 else None)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
