"""How a workload is started on a node: the torchrun command line and the protocol environment."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import chaos
from chaos.instep.command import DIR_ENV as INSTEP_DIR_ENV
from chaos.runtime.context import RunContext
from chaos.spec import interpreter

PACKAGE_ROOT = Path(chaos.__file__).resolve().parent.parent
INSTEP_BOOTSTRAP = Path(chaos.__file__).resolve().parent / "instep" / "bootstrap"
"""The folder that holds the chaos package (the repository, for a checkout): on the ranks' PYTHONPATH and
bound into containers, so a node imports the same chaos as the harness (and a checkout's tests/ and
workloads/ are there too)."""


@dataclass
class Rendezvous:
    """Where the agents meet. ``standalone`` lets a single-node torchrun pick its own free port."""

    standalone: bool = True
    host: str = "127.0.0.1"
    port: int = 0
    nnodes: str = "1"
    node_rank: int = 0
    run_id: str = "chaos"
    local_addr: str | None = None
    """This node's own address (torchrun --local-addr): what peers and workers connect to, instead of the host's name."""
    rdzv_conf: dict[str, str] = field(default_factory=dict)
    """torchrun --rdzv-conf entries, e.g. is_host (who serves the store), last_call_timeout (elastic shrink)."""


def script_args(args: dict) -> list[str]:
    out: list[str] = []
    for key, value in args.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            out.append(flag)
            out.extend(str(v) for v in value)
        else:
            out.extend([flag, str(value)])
    return out


def workload_argv(run: RunContext, rdzv: Rendezvous, python: str | None = None, resolve: bool = True) -> list[str]:
    """The command that starts one node's agent, with ``python`` (default: the workload's interpreter on this host,
    workload.python or the harness's). ``resolve``: a ``command``'s program found as this host runs it (False: as
    written, for a machine of its own, e.g. a user's container image)."""
    exp = run.experiment
    w = exp.workload
    python = python or interpreter.workload_python(exp)
    if w.command is not None:
        subs = {
            "run_dir": str(run.run_dir.resolve()), "ckpt_dir": str(run.ckpt_dir.resolve()), "port": str(rdzv.port),
            "nproc_per_node": str(w.nproc_per_node), "nnodes": rdzv.nnodes,
            "node_rank": str(rdzv.node_rank), "master_addr": rdzv.host,
        }
        argv = [_substitute(part, subs) for part in w.command]
        return [resolve_command(argv[0], python) if resolve else argv[0], *argv[1:]]
    argv = [python, "-m", LAUNCHER_MODULES[w.launcher],
            "--nproc-per-node", str(w.nproc_per_node),
            "--max-restarts", str(w.max_restarts),
            # The agent checks its workers this often: the floor of every detect_s figure.
            "--monitor-interval", "0.1"]
    if rdzv.standalone:
        argv.append("--standalone")
    else:
        argv += ["--nnodes", rdzv.nnodes, "--node-rank", str(rdzv.node_rank),
                 "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{rdzv.host}:{rdzv.port}",
                 "--rdzv-id", rdzv.run_id]
        if rdzv.local_addr:
            argv += ["--local-addr", rdzv.local_addr]
        if rdzv.rdzv_conf:
            argv += ["--rdzv-conf", ",".join(f"{k}={v}" for k, v in rdzv.rdzv_conf.items())]
    argv += script_args(w.launcher_args)
    argv.append(str(exp.resolve_script()))
    return argv + script_args(w.args)


LAUNCHER_MODULES = {"torchrun": "chaos.runtime.torchrun", "ft_launcher": "nvidia_resiliency_ext.fault_tolerance.launcher"}
"""The module each workload.launcher runs as (``python -m``, with the workload's interpreter). torchrun's is
torch.distributed.run's own ``main`` started without the garbage collector's work on torch's import and ended
without the interpreter's teardown (chaos/runtime/torchrun.py): the same agent, half a CPU-second cheaper."""


def check_launcher(run: RunContext) -> None:
    """Raise CapabilityError, before launch, when the workload's interpreter (workload.python) is not there or the
    experiment's launcher is not installed in it."""
    interpreter.check(run.experiment)
    w = run.experiment.workload
    if w.command is not None or w.launcher == "torchrun":
        return
    from chaos.errors import CapabilityError

    module = LAUNCHER_MODULES[w.launcher]
    if interpreter.missing_modules(run.experiment, (module,)):
        raise CapabilityError(f"workload.launcher {w.launcher} needs NVIDIA Resiliency Extension ({module} is not "
                              'importable): pip install -e ".[nvrx]" (scripts/setup.sh installs it)')


def resolve_command(name: str, python: str = sys.executable) -> str:
    """A bare command (``torchrun``, ``python``, ``accelerate``) as the one next to the workload's interpreter
    (the harness's own, or workload.python) when there is one: that virtual environment has the torch it was set
    up with, and need not be activated (on PATH) for ``chaos run`` to work."""
    if not name or os.sep in name:
        return name
    beside = Path(python).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else name


def with_run_dir(value: str, run_dir: Path) -> str:
    """``value`` with ``{run_dir}`` as the run directory's absolute path (workload.cwd, workload.ckpt_dir)."""
    return value.replace("{run_dir}", str(Path(run_dir).resolve()))


def workload_cwd(run: RunContext, make: bool = True) -> str | None:
    """The workload's working directory (workload.cwd, ``{run_dir}`` substituted; made unless ``make`` is
    False, e.g. for --dry-run); None: the harness's."""
    cwd = run.experiment.workload.cwd
    if cwd is None:
        return None
    path = Path(with_run_dir(cwd, run.run_dir)).expanduser().resolve()
    if make:
        path.mkdir(parents=True, exist_ok=True)
    return str(path)


def _substitute(part: str, subs: dict[str, str]) -> str:
    for key, value in subs.items():
        part = part.replace("{" + key + "}", value)
    return part


def with_package(pythonpath: str | None) -> str:
    """``pythonpath`` with the folder holding the chaos package first: what every process the harness starts needs
    to import chaos (the ranks' chaos.sdk, a daemon's module) even from a plain checkout."""
    return os.pathsep.join(p for p in [str(PACKAGE_ROOT), pythonpath or ""] if p)


def workload_env(run: RunContext, node: str) -> dict[str, str]:
    """The protocol variables plus the experiment's own, over the harness's environment."""
    return {**os.environ, **protocol_env(run, node)}


def protocol_env(run: RunContext, node: str) -> dict[str, str]:
    """Only what the harness sets for a node: the protocol's variables, the experiment's and the faults' (a node
    the harness does not start from its own environment, e.g. a pod on a cluster of the user's, gets just these)."""
    env: dict[str, str] = {}
    # Make `chaos.sdk` importable by the workload even from a plain checkout.
    env["PYTHONPATH"] = with_package(os.environ.get("PYTHONPATH"))
    # workload.python: its environment activated, and of the harness's only the chaos package on the path.
    env.update(interpreter.activation(run.experiment, run.run_dir, os.environ.get("PYTHONPATH")))
    if run.instep_dir is not None:
        # In-step faults act inside the ranks: a sitecustomize that loads chaos.instep.rank once torch's
        # optimizers are imported. Only runs that arm one get it.
        env["PYTHONPATH"] = os.pathsep.join([str(INSTEP_BOOTSTRAP), env["PYTHONPATH"]])
        env[INSTEP_DIR_ENV] = str(run.instep_dir.resolve())
    env.update({
        # Absolute: a workload with its own working directory (workload.cwd) must still find them.
        "CHAOS_RUN_DIR": str(run.run_dir.resolve()),
        "CHAOS_EVENTS_DIR": str(run.events_dir.resolve()),
        "CHAOS_CKPT_DIR": str(run.ckpt_dir.resolve()),
        "CHAOS_LAUNCH": str(run.launch_no),
        "CHAOS_HOST": node,
        "PYTHONUNBUFFERED": "1",
    })
    multi_node = run.target is not None and run.target.node_count > 1
    if not run.experiment.workload.share_rdzv_store or multi_node:
        # A fresh rendezvous store per attempt: no stale gloo keys from the attempt that died.
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    env.update(run.experiment.workload.env)
    # Faults and the relaunch policy add variables per run (e.g. CHAOS_XID_SOURCE, CUDA_VISIBLE_DEVICES).
    env.update(run.workload_env)
    return env
