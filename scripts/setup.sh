#!/usr/bin/env bash
# Set up a development environment in .venv: torch pinned to the CPU wheel, then this package.
# With root, also the system tools the root/docker tests need (iproute2, nftables, docker.io, slurm,
# chromium for the HTML report's screenshot test) and a
# running dockerd. Idempotent: re-running only fills in what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${CHAOS_VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip "$@"; }
# torch first and pinned: an unpinned torch (even through a dependency's range) pulls several GB
# of CUDA wheels; 2.13.0 resolves to the local CPU wheel on these machines.
if ! "$VENV/bin/python" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  pip install -q "torch==2.13.0"
fi
# dev includes the training stacks the integration experiments run (the [stateful] extra's torchdata).
pip install -q -e ".[dev]"
# Stacks pinned at another version than the harness's, each in an environment of its own that an experiment names
# as workload.python (the findings of a stack's older release, next to the remedy the harness's version proves).
# Each is layered on .venv: its own site-packages hold only the pinned stack, and .venv's come after them (a
# .pth that adds them), so torch and every other dependency is the one already installed: one small wheel each,
# no second torch.
# Both are made by .venv's own interpreter and made again when their Python is no longer .venv's (a .venv rebuilt
# on another Python would otherwise leave them pointing at, or linking, another version's packages).
same_python() {  # same_python <dir>: its python runs and is .venv's version
  [ "$("$1/bin/python" -c 'import sys; print(sys.version)' 2>/dev/null)" = "$("$VENV/bin/python" -c 'import sys; print(sys.version)')" ]
}
harness_site() { "$VENV/bin/python" -c 'import os, sysconfig; print(os.path.realpath(sysconfig.get_paths()["purelib"]))'; }
stack_env() {  # stack_env <dir name> <requirement>
  local dir=".venvs/$1" req=$2 base own
  base=$(harness_site)
  if ! same_python "$dir" || ! grep -qF "'$base'" "$dir"/lib/python*/site-packages/chaos-layered-on-harness.pth 2>/dev/null \
     || ! "$dir/bin/python" -c "import importlib.metadata as m, sys; n, v = sys.argv[1].split('=='); sys.exit(m.version(n) != v)" "$req" 2>/dev/null; then
    rm -rf "$dir"
    "$VENV/bin/python" -m venv --without-pip "$dir"
    own=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "import site; site.addsitedir('$base')" > "$own/chaos-layered-on-harness.pth"
    "$dir/bin/python" -m pip install -q --no-deps "$req"  # pip itself comes from .venv, through the layer
  fi
}
# torchft 0.2.0: its survivor dies when a peer dies inside the all-reduce (experiments/torchft-0.2.0-peer-dies-in-allreduce.yaml).
stack_env torchft-0.2.0 "torchft==0.2.0"
# The harness's environment less some packages, as a user's that never installed them: its site-packages a view of
# .venv's (a link to each entry but theirs), remade on every setup so that it follows .venv; programs from .venv's
# bin/ linked by name (their #! is .venv's python: only those whose environment the finding does not depend on,
# e.g. torchft's lighthouse, which takes no part in healing).
env_without() {  # env_without <dir name> "<top-level names to leave out>" "<programs to link>"
  local dir=".venvs/$1" leave=" $2 " progs=$3 base own entry name
  same_python "$dir" || { rm -rf "$dir"; "$VENV/bin/python" -m venv --without-pip "$dir"; }
  base=$(harness_site)
  own=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  find "$own" -mindepth 1 -maxdepth 1 -type l -delete
  for entry in "$base"/*; do
    name=$(basename "$entry")
    [[ $leave == *" ${name%%-[0-9]*} "* || $leave == *" ${name%.libs} "* ]] && continue
    ln -s "$entry" "$own/$name"
  done
  for name in $progs; do ln -sf "$(realpath "$VENV/bin/$name")" "$dir/bin/$name"; done
}
# torchft without numpy, which it uses and does not declare: healing dies (experiments/torchft-without-numpy.yaml).
env_without torchft-without-numpy "numpy" "torchft_lighthouse"

# The project's own modules as bytecode, as pip leaves every installed package: an editable install compiles
# nothing, and where PYTHONDONTWRITEBYTECODE is set (these machines set it) no import writes a .pyc either, so every
# process (each rank, each torchrun agent's workers, each `chaos` command) would compile chaos/ and workloads/
# from source again: 0.11 CPU-s per rank, 0.2 s per CLI call (ci/bench/bytecode.py).
"$VENV/bin/python" -m compileall -q -j 0 chaos workloads tests >/dev/null

if [ "$(id -u)" = 0 ] && [ "${CHAOS_SKIP_SYSTEM:-0}" != 1 ]; then
  missing=()
  command -v ip >/dev/null || missing+=(iproute2)
  command -v nft >/dev/null || missing+=(nftables)
  command -v dockerd >/dev/null || missing+=(docker.io)
  # The slurm target's local cluster (each run starts its own munged, slurmctld and slurmds).
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  # The report test looks at report.html in a real headless browser (a screenshot, not only the text).
  command -v chromium >/dev/null || missing+=(chromium)
  # The metrics test sends a real run's metrics to a real Pushgateway and reads them back from a real Prometheus.
  command -v prometheus >/dev/null || missing+=(prometheus)
  command -v prometheus-pushgateway >/dev/null || missing+=(prometheus-pushgateway)
  # The slow-storage fault's passthrough filesystem (chaos.runtime.slowfs: mfusepy over libfuse 2).
  ldconfig -p | grep -q 'libfuse\.so\.2' || missing+=(libfuse2)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq >/dev/null
    # No service starts during the install (no system munge/slurm daemons left running): the
    # harness starts the daemons it needs per run, with their own key and configuration.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; made_policy=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
      || { [ $made_policy = 1 ] && rm -f "$policy"; exit 1; }
    [ $made_policy = 1 ] && rm -f "$policy"
  fi
  if ! docker info >/dev/null 2>&1; then
    echo "setup: starting dockerd (log: /tmp/chaos-dockerd.log)" >&2
    (setsid dockerd >/tmp/chaos-dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || echo "setup: dockerd did not start; docker tests will skip (see /tmp/chaos-dockerd.log)" >&2
  fi
fi
echo "setup: ready ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))" >&2
