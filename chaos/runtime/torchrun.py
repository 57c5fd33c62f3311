"""torchrun's elastic agent as the harness starts it: torch's own code, started and ended lean.

``python -m chaos.runtime.agent ARGS`` is ``torchrun ARGS``: it calls ``torch.distributed.run.main``,
the function the ``torchrun`` console script calls, with the same arguments, so rendezvous, worker
monitoring, restarts, signal handling and exit status are torchrun's. Two things differ, and neither
is visible to the job:

- the cyclic garbage collector is off while torch is imported (that import builds about a million
  long-lived objects, none of them garbage, and the collector walks the growing heap again and again
  while they are made; trainkit/startup.py does the same for the reference ranks);
- after a successful run the process ends without the interpreter's teardown (module and C++ static
  destructors of a loaded torch): exit handlers run, non-daemon threads are joined and streams are
  flushed first, as at a normal exit, then ``os._exit(0)``. A failing run (torchrun raises, e.g.
  ChildFailedError once restarts are exhausted) is left to Python's own handling: its traceback,
  its error file and its exit status are exactly torchrun's.

Every run has an agent per node and the suite has about two hundred: the pair saves about half a
CPU-second per agent (ci/bench/agent_exit.py measures it against ``python -m torch.distributed.run``).
Only the standard library and torch are imported here, so a container that has torch and sees the
package on its PYTHONPATH (every target puts it there for chaos.sdk) runs it too.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
import threading


def exit_now(code: int = 0) -> None:
    """What a normal interpreter exit does that matters to the job, then exit with ``code`` without the teardown
    (also the reference pre-flight gate's exit: chaos.health.preflight)."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # torchrun's and logging's handlers: the same ones a normal exit runs
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said anyway
            pass
    os._exit(code)


def main() -> None:
    gc.disable()
    from torch.distributed.run import main as torchrun

    gc.freeze()
    gc.enable()
    sys.argv[0] = "torchrun"  # its usage and error messages name the command users know
    try:
        torchrun()
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
    exit_now()


if __name__ == "__main__":
    main()
