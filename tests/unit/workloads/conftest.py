"""Make the reference workloads' ``trainkit`` importable for its unit tests."""

import sys
from pathlib import Path

WORKLOADS = Path(__file__).resolve().parents[3] / "workloads"
if str(WORKLOADS) not in sys.path:
    sys.path.insert(0, str(WORKLOADS))
