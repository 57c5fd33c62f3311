"""The few API calls an undo replays, as a command (the ledger stores commands, and ``chaos cleanup`` may run
long after the harness that cordoned a node or created a Job is gone):

    python -m chaos.kube.ctl uncordon KUBECONFIG NODE OWNER [--context C]
                                 make NODE schedulable again, only while the cordon is OWNER's (its annotation)
    python -m chaos.kube.ctl cordoned KUBECONFIG NODE OWNER [--context C]
                                 exit 0 if NODE is still cordoned by OWNER
    python -m chaos.kube.ctl delete-jobs KUBECONFIG NS SELECTOR [--context C]
                                 delete the run's Jobs (SELECTOR, e.g. chaos/run=chaos-ab12) and wait for their pods
    python -m chaos.kube.ctl jobs-left KUBECONFIG NS SELECTOR [--context C]
                                 exit 0 if a Job or pod of SELECTOR is still there (the undo's probe)
    python -m chaos.kube.ctl exec KUBECONFIG NS POD CONTAINER [--context C] -- ARGV...
                                 run ARGV in the container (a SIGCONT to a stopped rank); exit with its code
    python -m chaos.kube.ctl running KUBECONFIG NS POD [--context C]       exit 0 if POD is running

A probe that cannot reach the cluster, or is refused, answers "still there" (but ``--gone-if-unreachable``: the run's
own local cluster, down once its teardown ran): a cleanup then reports what it could
not undo rather than taking it for done. Only the API's own "not found" of the pod or node means gone.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

CORDONED_BY = "chaos/cordoned-by"
"""The annotation a drain's cordon carries: only a cordon of the run's own is undone (an operator may cordon the
node for their own reasons meanwhile)."""
ARGS = {"uncordon": ("node", "owner"), "cordoned": ("node", "owner"), "delete-jobs": ("namespace", "selector"),
        "jobs-left": ("namespace", "selector"), "exec": ("namespace", "pod", "container"),
        "running": ("namespace", "pod")}
PROBES = {"cordoned", "jobs-left", "running"}
WAIT_PODS_S = 90.0
"""How long delete-jobs waits for the Jobs' pods to go (their grace periods run first)."""


def command(verb: str, *args: str, context: str | None = None, local: bool = False) -> list[str]:
    """The argv of one of these calls, as the ledger stores it (``local``: the run's own throwaway cluster)."""
    return [sys.executable, "-m", "chaos.kube.ctl", verb, *args, *(["--context", context] if context else []),
            *(["--gone-if-unreachable"] if local else [])]


def parse(argv: list[str]) -> argparse.Namespace:
    rest: list[str] = []
    if "--" in argv:
        argv, rest = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    p = argparse.ArgumentParser(prog="python -m chaos.kube.ctl", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    for verb, names in ARGS.items():
        s = sub.add_parser(verb)
        s.add_argument("kubeconfig")
        for name in names:
            s.add_argument(name)
        s.add_argument("--context", default=None)
        s.add_argument("--gone-if-unreachable", action="store_true",
                       help="the run's own local cluster: unreachable after the run means its teardown ran")
    args = p.parse_args(argv)
    args.argv = rest
    return args


def _selected(core: Any, batch: Any, ns: str, selector: str) -> list[str]:
    jobs = batch.list_namespaced_job(ns, label_selector=selector, _request_timeout=10).items
    pods = core.list_namespaced_pod(ns, label_selector=selector, _request_timeout=10).items
    return [f"job/{j.metadata.name}" for j in jobs] + [f"pod/{p.metadata.name}" for p in pods]


def act(args: argparse.Namespace) -> int:
    from kubernetes import client, config

    from chaos.kube.existing import wait_gone

    api = config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    if args.verb in ("cordoned", "uncordon"):
        node = core.read_node(args.node, _request_timeout=10)
        ours = (node.metadata.annotations or {}).get(CORDONED_BY) == args.owner
        if args.verb == "cordoned":
            return 0 if ours and node.spec.unschedulable else 1
        if ours:  # the resourceVersion: a cordon someone made since the read is not undone blindly
            core.patch_node(args.node, {"metadata": {"annotations": {CORDONED_BY: None},
                                                     "resourceVersion": node.metadata.resource_version},
                                        "spec": {"unschedulable": None}}, _request_timeout=10)
        return 0
    if args.verb == "jobs-left":
        return 0 if _selected(core, batch, args.namespace, args.selector) else 1
    if args.verb == "running":
        return 0 if core.read_namespaced_pod(args.pod, args.namespace, _request_timeout=10).status.phase == "Running" \
            else 1
    if args.verb == "delete-jobs":
        for job in batch.list_namespaced_job(args.namespace, label_selector=args.selector, _request_timeout=10).items:
            batch.delete_namespaced_job(job.metadata.name, args.namespace, propagation_policy="Background",
                                        _request_timeout=10)
        left = wait_gone(lambda: _selected(core, batch, args.namespace, args.selector), WAIT_PODS_S)
        if left:
            print(f"still there after {WAIT_PODS_S:g} s: {', '.join(left)}", file=sys.stderr)
        return 3 if left else 0
    from chaos.kube.existing import ExistingCluster

    cluster = ExistingCluster(args.kubeconfig, args.context, args.namespace)
    code, out, err = cluster.exec(args.pod, args.container, args.argv)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return 3 if code is None else code


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    from chaos.kube.minicluster import api_errors

    try:
        return act(args)
    except ApiException as exc:
        if exc.status == 404 and args.verb in PROBES:  # the pod or node itself is gone: nothing left to undo on it
            return 1
        print(f"chaos.kube.ctl {args.verb}: {exc.status} {exc.reason}", file=sys.stderr)
        return 0 if args.verb in PROBES else 3
    except (*api_errors(), ConfigException) as exc:
        if args.gone_if_unreachable:  # the run's own throwaway cluster is down: nothing of it is left to undo
            return 1 if args.verb in PROBES else 0
        # The cluster cannot be reached or refuses (an expired token, a network down): what a probe cannot see is
        # still there, so the undo is tried and a cleanup reports what it could not do.
        print(f"chaos.kube.ctl {args.verb}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0 if args.verb in PROBES else 3


if __name__ == "__main__":
    sys.exit(main())
