"""The attempt label of each round of workers the harness saw: one rule for the runner's live labels and the history's.

A round's workers report the restart count of their own torchrun agent. On a multi-node job only the agent whose
worker failed counts a restart; its peers re-rendezvous and keep their count. The round's label is therefore the
highest count any of its workers report. That alone can repeat a label: a kill on node 1 (node 1 counts 1, node 0
stays at 0: the round is ``0.1``) and then a kill on node 0 (node 0 counts 1, node 1 still 1: ``0.1`` again) would
make two rounds one attempt, and a check bounding restarts would count one where two were spent.

A label is raised past its predecessor's where the two rounds are provably two: they share a node and that node's
agent counted a restart between them (its workers report a higher count in the later round). Rounds in which no
shared node counted anything are left alone (one agent's workers seen in two pieces, a worker that died before the
next was first seen). On a job whose nodes restart together (every torchrun rendezvous is one round of all of
them) a round whose highest count is below the previous round's is a piece of that round (its node's workers
appeared after the rest had already died, so the harness numbered them apart): it takes that round's label. The
replica groups of a drop-replica job restart apart (``independent``): each group's rounds form a chain of their
own, and a group the harness launched again counts from 0 again.
"""

from __future__ import annotations

from collections.abc import Iterable

from chaos.evidence.records import attempt_key

Member = tuple[str, str]
"""(node, the attempt its worker reported: ``launch.restart_count``)."""


def raised(label: str) -> str:
    """The label one restart after ``label`` (``0.1`` -> ``0.2``); one that is not ``launch.restart`` as it is."""
    launch, _, restart = label.partition(".")
    if not (launch.isdigit() and restart.isdigit()):
        return label
    return f"{launch}.{int(restart) + 1}"


def round_labels(rounds: Iterable[tuple[int, list[Member]]], independent: bool = False) -> dict[int, str]:
    """Each round's attempt label, for rounds given in the order the harness numbered them (by generation)."""
    labels: dict[int, str] = {}
    seen: list[tuple[int, dict[str, str]]] = []
    """Earlier rounds: generation and the highest count each node reported in it."""
    for generation, members in rounds:
        if not members:
            continue
        label = max((a for _, a in members), key=attempt_key)
        by_node: dict[str, str] = {}
        for node, a in members:
            if node not in by_node or attempt_key(a) > attempt_key(by_node[node]):
                by_node[node] = a
        if seen and not independent and attempt_key(label) < attempt_key(labels[seen[-1][0]]):
            label = labels[seen[-1][0]]  # a piece of the round before it
        else:
            previous = next(((g, nodes) for g, nodes in reversed(seen) if nodes.keys() & by_node.keys()), None)
            if previous is not None:
                before = labels[previous[0]]
                counted = any(attempt_key(by_node[n]) > attempt_key(a) for n, a in previous[1].items()
                              if n in by_node)
                if counted and attempt_key(label) <= attempt_key(before):
                    label = raised(before)
        labels[generation] = label
        seen.append((generation, by_node))
    return labels
