#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite: unit tests, real multi-process
# integration runs, and every experiment in experiments/ as a test item.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${CHAOS_VENV:-.venv}
export CHAOS_CACHE_DIR=${CHAOS_CACHE_DIR:-$PWD/.cache/chaos}
exec "$VENV/bin/python" -m pytest -n "${CHAOS_TEST_WORKERS:-2}" --dist loadgroup -p no:cacheprovider \
  --chaos-runs-dir "${CHAOS_RUNS_DIR:-runs/tests}" tests experiments "$@"
