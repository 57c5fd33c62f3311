#!/usr/bin/env bash
# A developer's fast tier: every unit test, and one experiment per fault family (a real torchrun job each), in
# under 4 minutes on a 2-core machine (docs/development.md has the measure). CI still runs everything
# (scripts/test.sh); this is the loop to run before pushing. Which experiment stands for each family, and why that
# one: docs/development.md ("The fast tier").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # setup, the venv, the golden cache, one intra-op thread per rank
FAMILIES=(
  experiments/rank-kill-ddp.yaml                # a rank dies: torchrun restart, resume, exactly-once, golden
  experiments/kill-node-elastic.yaml            # a node dies (netns nodes; root)
  experiments/hang-rank-ddp.yaml                # a hung rank: detection by the collective timeout
  experiments/network-loss-ddp.yaml             # a degraded link (nftables loss; root)
  experiments/xid-92-ecc-creep.yaml             # NVIDIA XID events and the health monitor's policy
  experiments/corrupt-checkpoint-bitflip-ddp.yaml  # a corrupt checkpoint found at the resume
  experiments/storage-full-fsdp.yaml            # full checkpoint storage (a small tmpfs; root)
  experiments/async-kill-after-durable-ddp.yaml # asynchronous saves and a kill between durable and commit
  experiments/loss-spike-ddp.yaml               # a fault inside the step
  experiments/slurm-rank-kill-ddp.yaml          # the scheduler (a local Slurm cluster; root)
  experiments/torchft-kill-replica.yaml         # a drop-replica job (torchft)
  experiments/nvrx-inprocess-restart-ddp.yaml   # an in-process restart (NVRx)
  experiments/accelerate-nan-loss.yaml          # a user's stack (Accelerate), a recorded known failure
)
exec "$VENV/bin/python" -m pytest -n "${CHAOS_TEST_WORKERS:-2}" --dist loadgroup -p no:cacheprovider \
  -rfER --chaos-runs-dir "${CHAOS_RUNS_DIR:-runs/fast}" tests/unit "${FAMILIES[@]}" "$@"
