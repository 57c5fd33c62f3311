"""The few API calls an undo replays, as a command (the ledger stores commands, and ``chaos cleanup`` may run
long after the harness that cordoned a node is gone):

    python -m chaos.kube.ctl uncordon KUBECONFIG NODE     # make NODE schedulable again
    python -m chaos.kube.ctl cordoned KUBECONFIG NODE     # exit 0 if NODE is still cordoned (the undo's probe)
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] not in ("uncordon", "cordoned"):
        print(__doc__, file=sys.stderr)
        return 2
    verb, kubeconfig, node = args
    from kubernetes import client, config

    try:
        core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        if verb == "cordoned":
            return 0 if core.read_node(node, _request_timeout=10).spec.unschedulable else 1
        core.patch_node(node, {"spec": {"unschedulable": None}}, _request_timeout=10)
        return 0
    except Exception as exc:  # the cluster is gone (its teardown ran first): nothing is left to undo there
        print(f"chaos.kube.ctl {verb} {node}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1 if verb == "cordoned" else 3


if __name__ == "__main__":
    sys.exit(main())
