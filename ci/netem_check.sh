#!/usr/bin/env bash
# On a kernel that has sch_netem (CI's and the developers' boxes have not): the netem path of network-degrade,
# for real. The network tests (a 150-ms netem delay on one node's link, measured and reverted; 100% loss
# through netem) and the two network experiments, whose loss and bandwidth cap then go through netem instead
# of the nftables/tbf fallback. Needs root, iproute2 and nftables. Ranks train on CPU (gloo), as in CI.
# Prints what it could and could not do; exits non-zero only if something that was possible failed.
#   bash ci/netem_check.sh
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_VISIBLE_DEVICES=""   # netns nodes share this host's one GPU at most: CPU ranks, as in CI
PY=${PYTHON:-python3}
say() { printf '\n== %s\n' "$*"; }

say "what this host supports"
doctor=$($PY -m chaos doctor 2>&1)
grep -E '^(ok|no) +(root|netns|netem|nftables|tbf) ' <<<"$doctor"
for tool in ip tc nft; do
  command -v $tool >/dev/null || { echo "CANNOT: $tool is not installed (iproute2, nftables)"; exit 0; }
done
[ "$(id -u)" -eq 0 ] || { echo "CANNOT: needs root (network namespaces, qdiscs)"; exit 0; }

failed=0
say "the network tests on this kernel"
$PY -m pytest -q -p no:cacheprovider tests/integration/test_network.py -rs || failed=1

say "the network experiments (netem loss, netem rate)"
if ! grep -qE '^ok +netem ' <<<"$doctor"; then
  echo "CANNOT: this kernel has no sch_netem (the tests above ran the fallback); skipped the netem experiments"
  exit $failed
fi
runs=${CHAOS_NETEM_RUNS:-$(mktemp -d)}
$PY -m chaos run --runs-dir "$runs" experiments/network-loss-ddp.yaml experiments/slow-link-ddp.yaml || failed=1
$PY - "$runs" <<'PY' || failed=1
import json, pathlib, sys
mechanisms = []
for run in sorted(pathlib.Path(sys.argv[1]).iterdir()):
    for line in (run / "harness.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["ev"] == "capability" and rec.get("what") == "netem":
            print(f"{run.name}: netem available={rec['available']} ({rec.get('detail')})")
        if rec["ev"] == "fault_inject":
            mechanisms.append(rec["details"].get("mechanism"))
            print(f"{run.name}: {rec['fault']} through {rec['details'].get('mechanism')}")
ok = bool(mechanisms) and all(m == "netem" for m in mechanisms)
print("netem path:", "OK" if ok else "NOT TAKEN (no netem on this kernel: the fallback ran instead)")
sys.exit(0 if ok else 1)
PY

say "summary"
[ $failed -eq 0 ] && echo "everything that could run here passed" || echo "SOME CHECKS FAILED (see above)"
exit $failed
