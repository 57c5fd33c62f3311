"""The driver's XID line: format, parse (with real log prefixes), and the device <-> bus id map."""

import pytest

from chaos.health.xidline import bus_id_for, format_xid_line, index_for, normalise_bus_id, parse_xid_line

SEED_LINE = ("Apr 22 03:14:17 kentino-ai-04 kernel: NVRM: Xid (PCI:0000:c1:00): 79, pid='<unknown>', "
             "name=<unknown>, GPU has fallen off the bus.")


def test_parses_the_journal_line_from_the_seeds() -> None:
    x = parse_xid_line(SEED_LINE)
    assert x is not None and (x.code, x.bus_id, x.pid) == (79, "0000:c1:00", None)
    assert x.text.endswith("GPU has fallen off the bus.")


def test_parses_dmesg_prefix_old_format_and_pid() -> None:
    x = parse_xid_line("[ 1234.5] NVRM: Xid (0000:3B:00.0): 13, pid=4242, name=python, Ch 00000010")
    assert x is not None and (x.code, x.bus_id, x.pid) == (13, "0000:3b:00", 4242)


def test_other_nvrm_lines_are_not_xids() -> None:
    assert parse_xid_line("NVRM: GPU 0000:c1:00.0: GPU is on Board .") is None


def test_format_matches_the_driver_and_round_trips() -> None:
    line = format_xid_line(79, "0000:c1:00")
    assert line == "NVRM: Xid (PCI:0000:c1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    assert parse_xid_line(line).code == 79  # type: ignore[union-attr]


@pytest.mark.parametrize("index", [0, 1, 7, 8, 15, 100])
def test_bus_id_map_is_deterministic_and_invertible(index: int) -> None:
    assert bus_id_for(index) == bus_id_for(index)
    assert index_for(bus_id_for(index)) == index


def test_distinct_devices_get_distinct_buses_and_unknown_buses_map_to_none() -> None:
    assert len({bus_id_for(i) for i in range(16)}) == 16
    assert index_for("0000:c1:00") is None
    assert normalise_bus_id("00000000:C1:00.0") == "0000:c1:00"
    with pytest.raises(ValueError):
        format_xid_line(79, "not-a-bus")
