"""The one rich Console the commands print through, so a captured log reads like the terminal.

Rich renders for 80 columns when its output is not a terminal, so a CI log (a pipe, a file) got every
line longer than that split, verdict reasons and run directories broken mid-word, and a grep for a
verdict missed its reason. A log's viewer wraps or scrolls by itself: there, no line is split, and
tables are laid out for the width the environment names (COLUMNS) or a wide one."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

LOG_WIDTH = 200
"""Table width in a log when COLUMNS does not say one: the recovery table's every column side by side."""


def make_console(**kwargs: Any) -> Console:
    """A Console for command output (``kwargs`` as rich's, e.g. ``file``); in a terminal, rich's own."""
    console = Console(highlight=False, **kwargs)
    if not console.is_terminal:
        console.soft_wrap = True  # a line is printed whole, however long
        if not os.environ.get("COLUMNS", "").strip().isdigit():  # rich read a valid COLUMNS itself
            console.width = LOG_WIDTH
    return console
