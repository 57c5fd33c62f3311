# The environment every test run shares (sourced by scripts/test.sh and scripts/fast.sh, from the repository root):
# the set-up .venv, the golden cache beside the checkout, and one intra-op thread per rank.
bash scripts/setup.sh
VENV=${CHAOS_VENV:-.venv}
export CHAOS_CACHE_DIR=${CHAOS_CACHE_DIR:-$PWD/.cache/chaos}
# One intra-op thread per process, as torchrun gives each of several workers on a node: the suite
# runs up to five jobs at once on two cores, and a job whose nodes are co-located here with one
# worker each (world-size changes, Slurm, netns) would otherwise run two OpenMP threads per rank,
# spinning for each other (hf-trainer-world-size-change: 13.2 -> 10.1 CPU-s, ci/bench/thread_count.py). The
# golden cache key carries the thread count, so goldens are not shared across the setting.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
