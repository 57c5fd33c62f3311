#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the flagship experiments: a readable verdict per experiment,
# run directories under runs/ (journal.json, junit.xml, events/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${CHAOS_VENV:-.venv}
# Experiments that need root (mounts, namespaces) say so and exit 2 without it.
exec "$VENV/bin/chaos" run --junit runs/flagship-junit.xml \
  experiments/baseline-ddp.yaml \
  experiments/rank-kill-ddp.yaml \
  experiments/rank-kill-fsdp.yaml \
  experiments/kill-during-save-fsdp.yaml \
  experiments/corrupt-checkpoint-bitflip-ddp.yaml \
  experiments/storage-full-fsdp.yaml \
  experiments/hang-rank-ddp.yaml \
  experiments/partition-node-ddp.yaml \
  experiments/xid-79-exclude.yaml "$@"
