"""``python -m chaos.slurm.reaper CMD...``: run a node daemon (slurmd) under a child subreaper.

slurmd starts each job step's ``slurmstepd`` through a double fork, so the step is re-parented to
PID 1 and its processes leave the node's process tree. Under this reaper they are re-parented to it
instead: the run's tree (and the harness's view of which node a rank runs on, kill-node's "every
process of the node", teardown's kill) keeps the whole node. The reaper reaps every orphan, forwards
SIGTERM/SIGINT to the daemon, and exits with the daemon's status once nothing is left under it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m chaos.slurm.reaper COMMAND [ARGS...]", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        print(f"reaper: prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(err)}", file=sys.stderr)
        return 1
    daemon = os.fork()
    if daemon == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(daemon, signum)
        except ProcessLookupError:
            pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    code = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:  # nothing left under us: the daemon and every orphan are gone
            break
        except InterruptedError:
            continue
        if pid == daemon:
            rc = os.waitstatus_to_exitcode(status)
            code = rc if rc >= 0 else 128 - rc
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
