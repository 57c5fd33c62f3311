"""ci/layout.py guards the package's layout (issue 33): no import circle between modules or rooms, at most
12 modules directly in chaos/, none over 450 lines, every subpackage saying what it owns."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "ci"))

import layout  # noqa: E402


def test_the_package_layout_keeps_its_limits() -> None:
    found, figures = layout.problems(ROOT)
    assert found == [], "\n".join(found)
    assert figures["module_circles"] == [] and figures["room_circles"] == []


def test_the_guard_sees_a_circle_a_long_module_and_a_silent_package(tmp_path: Path) -> None:
    pkg = tmp_path / "chaos"
    (pkg / "room").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""root"""\n')
    (pkg / "room" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from chaos.room import b\n")
    (pkg / "room" / "b.py").write_text("def f():\n    from chaos import a\n" + "x = 1\n" * 460)
    found, figures = layout.problems(tmp_path)
    assert figures["module_circles"] == [2] and figures["room_circles"] == [2]
    assert any("chaos.room.b: 462 lines" in f for f in found)
    assert any("chaos.room: a package without a docstring" in f for f in found)
