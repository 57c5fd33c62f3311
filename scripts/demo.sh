#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the flagship experiments: a readable verdict per experiment,
# run directories under runs/ (journal.json, junit.xml, events/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${CHAOS_VENV:-.venv}
exec "$VENV/bin/chaos" run --junit runs/flagship-junit.xml \
  experiments/baseline-ddp.yaml experiments/rank-kill-ddp.yaml "$@"
