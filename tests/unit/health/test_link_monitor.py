"""LinkMonitor: a ring probe's times name the slow sender, and noise on fast links names no one."""

from __future__ import annotations

from chaos.health.link import LinkMonitor


def feed(mon: LinkMonitor, rows: list[list[float]]) -> list:
    named = []
    for i, row in enumerate(rows, start=1):
        hit = mon.observe(i * mon.every, row)
        if hit is not None:
            named.append(hit)
    return named


def test_a_slow_sender_is_named_once_after_two_slow_windows() -> None:
    mon = LinkMonitor(world_size=2, every=5, factor=3.0, window=3, patience=2, floor_s=0.005)
    named = feed(mon, [[0.0004, 0.0005]] * 3 + [[0.0004, 0.11]] * 9)
    assert [(n.rank, n.step) for n in named] == [(1, 45)]
    assert named[0].ratio == 22.0  # 0.11 against the 5 ms floor, not against 0.4 ms of a healthy link


def test_noise_on_healthy_links_names_no_one() -> None:
    # 3 ms against 0.3 ms is "10x", but both are far under the floor: scheduler noise, not a link.
    mon = LinkMonitor(world_size=4, every=1, factor=3.0, window=3, patience=1, floor_s=0.005)
    assert feed(mon, [[0.0003, 0.003, 0.0004, 0.0003]] * 12) == []


def test_probes_are_due_on_every_nth_step_and_never_alone() -> None:
    mon = LinkMonitor(world_size=2, every=5)
    assert [s for s in range(1, 21) if mon.due(s)] == [5, 10, 15, 20]
    assert not any(LinkMonitor(world_size=1, every=5).due(s) for s in range(1, 21))
