#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite: unit tests, real multi-process
# integration runs, and every experiment in experiments/ as a test item.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${CHAOS_VENV:-.venv}
export CHAOS_CACHE_DIR=${CHAOS_CACHE_DIR:-$PWD/.cache/chaos}
# Real multi-process torch runs on a shared 2-core box have rare nondeterministic failures of the
# stack itself (a gloo peer aborting at exit, heap corruption in an FSDP full-state gather), each
# of which costs a torchrun restart that a restart bound then counts. One rerun absorbs those; a
# real regression fails twice. Reruns are listed in the summary (the R in -rfER).
# Three workers on two cores: the suite is half waiting (restart back-offs, collective timeouts,
# fault durations, rendezvous), so a third worker fills the gaps. Measured 2026-11-24 on the 2-core
# box, same tree: -n 2 17 min 24 s (CPU 1.4 of 2 cores busy), -n 3 12 min 50 s, -n 4 13 min 37 s;
# no test failed or was rerun at -n 3 or -n 4. Again that evening, on a faster host: -n 3 12 min 9 s,
# -n 4 11 min 40 s (within the box's swing). CHAOS_TEST_WORKERS overrides.
exec "$VENV/bin/python" -m pytest -n "${CHAOS_TEST_WORKERS:-3}" --dist worksteal -p no:cacheprovider \
  --reruns 1 -rfER \
  --chaos-runs-dir "${CHAOS_RUNS_DIR:-runs/tests}" tests experiments "$@"
