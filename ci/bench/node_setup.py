"""Node setup and teardown time per node: netns target (namespaces, veth, bridge) and docker target (containers).

    python ci/bench/node_setup.py [--reps 3] [--nodes 2 4]

Needs root (and a docker daemon for the docker rows). Prints medians per node, side by side.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell
from chaos.targets.netns import Netns, NetnsConfig


def _run(tmp: Path) -> RunContext:
    log = HarnessLog(tmp / "harness.jsonl")
    return RunContext(experiment=None, run_dir=tmp, ckpt_dir=tmp, ledger=Ledger(tmp),  # type: ignore[arg-type]
                      shell=Shell(log), log=log, rng=random.Random(0))


def time_netns(nodes: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        run = _run(Path(d))
        target = Netns(NetnsConfig(nodes=nodes))
        t0 = time.perf_counter()
        target.prepare(run)
        t1 = time.perf_counter()
        failures = run.ledger.revert(run.shell)
        t2 = time.perf_counter()
        if failures:
            raise SystemExit(f"teardown failed: {failures}")
        return (t1 - t0) / nodes, (t2 - t1) / nodes


def time_docker(nodes: int) -> tuple[float, float] | None:
    """Containers of the host-userland image on a private network, each running `sleep` (no torch)."""
    try:
        import docker
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception:  # no SDK or no daemon: the docker rows are left out, said in the table
        return None
    from chaos.runtime.hostimage import HOST_IMAGE_REPO, host_binds, host_rootfs_tar
    import hashlib

    tar = host_rootfs_tar()
    ref = f"{HOST_IMAGE_REPO}:{hashlib.sha1(tar).hexdigest()[:12]}"
    if not client.images.list(name=ref):
        client.api.import_image_from_data(tar, repository=HOST_IMAGE_REPO, tag=ref.split(":")[1])
    name = f"chaos-bench-{random.randrange(16**6):06x}"
    t0 = time.perf_counter()
    net = client.networks.create(name, driver="bridge", internal=True)
    conts = [client.containers.run(ref, ["sleep", "600"], name=f"{name}-n{k}", network=name, detach=True,
                                   volumes=host_binds()) for k in range(nodes)]
    t1 = time.perf_counter()
    for c in conts:
        c.remove(force=True)
    net.remove()
    t2 = time.perf_counter()
    return (t1 - t0) / nodes, (t2 - t1) / nodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    args = ap.parse_args()
    print(f"{'target':<8} {'nodes':>5} {'setup s/node':>13} {'teardown s/node':>16}   (median of {args.reps})")
    for nodes in args.nodes:
        for kind, fn in (("netns", time_netns), ("docker", time_docker)):
            samples = [fn(nodes) for _ in range(args.reps)]
            if any(s is None for s in samples):
                print(f"{kind:<8} {nodes:>5} {'no docker daemon: ci/install-node-tools.sh':>30}")
                continue
            setup = statistics.median(s[0] for s in samples)  # type: ignore[index]
            down = statistics.median(s[1] for s in samples)  # type: ignore[index]
            print(f"{kind:<8} {nodes:>5} {setup:>13.3f} {down:>16.3f}")


if __name__ == "__main__":
    main()
