#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite: unit tests, real multi-process
# integration runs, and every experiment in experiments/ as a test item.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh   # setup, the venv, the golden cache, one intra-op thread per rank
# Real multi-process torch runs on a shared 2-core box have rare nondeterministic failures of the
# stack itself (a gloo peer aborting at exit, heap corruption in an FSDP full-state gather), each
# of which costs a torchrun restart that a restart bound then counts. One rerun absorbs those; a
# real regression fails twice. Reruns are listed in the summary (the R in -rfER).
# Five workers on two cores, each taking the next test as it frees
# in longest-first order (tests/conftest.py, from the measured tests/durations.json): the suite is
# CPU-bound with waits in between (restart back-offs, collective timeouts, Slurm timers), and the
# slowest runs, a Slurm requeue or the game day, start at once instead of being dealt last and
# running alone. Measured 2026-11-25 on the 2-core box, empty golden cache: -n 3 12 min 37 s with
# 19 % of the CPU idle (import torch 1.07 CPU-s), -n 4 12 min 9 s with 13 % idle (1.13 CPU-s);
# after the workloads paused the collector at start-up, -n 4 11 min 29 s with 13 % idle (1.15) and
# -n 5 11 min 8 s with 7 % idle on a slower hour (1.26); no rerun in any. With one thread per rank
# (below) and this order, -n 5 9 min 28-40 s, three runs in a row (1.04-1.06). On 2026-11-26, with the torchft
# runs (each waits out a lighthouse heartbeat timeout and a replica group's absence), -n 5 left 13 % of the CPU
# idle (1,796 CPU-s in tests, 17 min 44 s from a fresh clone, import torch 1.48 CPU-s); -n 6 did not fill those
# waits: 18 min 38 s (1,902 CPU-s, 1.43 CPU-s), a torchrun restart slowed to 15 s and one rerun. CHAOS_TEST_WORKERS
# overrides. On 2026-11-27 the waits had grown to 4,014 of 5,741 summed test-seconds (20 min 1 s): each run on the host's
# one local Kubernetes queues for it (chaos/kube/minicluster.py), and longest-first dealt all of them at once, each
# holding a worker idle for minutes. --dist loadgroup sends those (xdist_group "host-kubernetes", set by the chaos
# plugin and the kube test modules) to one worker, one after another, first (the biggest group); every other test is
# a group of its own, in longest-first order (a worker holds at most two: the one it runs and the next).
# pytest 9.2 silently undid that grouping (pytest-dev/pytest-xdist#1386: the group rides on a nodeid suffix that
# pytest's structured node ids drop): the Kubernetes runs spread over the workers again and queued in the lock
# (21 min 44 s, then 22 min 2 s with one more local-cluster fault). pyproject pins pytest below 9.2, and
# tests/unit/test_pytest_plugin.py fails if the group stops running on one worker.
exec "$VENV/bin/python" -m pytest -n "${CHAOS_TEST_WORKERS:-5}" --dist loadgroup -p no:cacheprovider \
  --reruns 1 -rfER \
  --chaos-runs-dir "${CHAOS_RUNS_DIR:-runs/tests}" tests experiments "$@"
