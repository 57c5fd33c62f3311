#!/usr/bin/env bash
# Build the server binaries of a real single-node Kubernetes v1.20.2 from Debian bookworm's source
# package, with the project's three patches (scripts/kube/patches/), and cache them on this machine
# for the `kubernetes` target's local cluster (`target: {kind: kubernetes, cluster: local}`).
#
# Why from source: no registry this machine reaches has a prebuilt kube-apiserver or kubelet; Debian
# builds only kubectl from its `kubernetes` source package, but that package's orig tarball is the
# full upstream v1.20.2 tree with vendor/, so it builds with no network beyond apt. Every step and
# flag below follows the measured recipe in the team's notes (shared/notes/
# kubernetes-from-debian-source.md); each patch's header says why it is needed.
#
# Output (stdout, one line): the directory holding kube-apiserver, kubelet, kube-controller-manager,
# kube-scheduler, etcd (Debian's etcd-server) and pause (build/pause/linux/pause.c, static). Progress
# and errors go to stderr. The cache is
#   ${CHAOS_KUBE_CACHE:-$HOME/.cache/chaos/kube}/<key>/{bin/,BUILDINFO,READY}
#   ${CHAOS_KUBE_CACHE:-$HOME/.cache/chaos/kube}/current -> <key>
# key = the Debian source version + a short hash of the patches and the build flags, so changing a
# patch or a flag builds a new entry and never reuses a stale one. A finished entry has READY,
# written last; one without it (a killed build) is never used and is removed by the next build.
# With READY present the script prints the bin directory and exits at once (every run but the first).
#
# A cold build needs root (apt). Measured 2026-11-26 on the 2-core machine, beside a running test
# suite (the compile runs at nice 19): 392 CPU-s, 687 s wall, of which the compile 368 CPU-s and
# 603 s. The build tree (the k8s source plus Go's build cache, in the GB range) lives in
# ${CHAOS_KUBE_BUILD_DIR:-/var/tmp/chaos-kube-build}, never in the repository, and is deleted after
# a successful build: commit only this script and the patches, never the k8s source or binaries.
# Nothing here starts a service or a cluster, or touches iptables, sysctls or docker.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PATCH_DIR="$REPO/scripts/kube/patches"
CACHE=${CHAOS_KUBE_CACHE:-$HOME/.cache/chaos/kube}
BUILD=${CHAOS_KUBE_BUILD_DIR:-/var/tmp/chaos-kube-build}

# Pinned: the patches are written against exactly this tree (upstream v1.20.2 + Debian's 3 patches).
DEB_SRC_VERSION=1.20.5+really1.20.2-1.1+deb12u1
K8S_VERSION=v1.20.2
# bookworm's only Go is 1.19; k8s 1.20 was released with Go 1.15, and 1.19 needs patch 0001.
GO_PKG=golang-1.19-go
GOROOT_DIR=/usr/lib/go-1.19
BINARIES=(kube-apiserver kubelet kube-controller-manager kube-scheduler)
# Kubernetes 1.20 predates working module builds from its tree ("updates to go.mod needed"): it is
# built in GOPATH mode, as its own hack/ scripts do. CGO off gives static binaries (as upstream);
# tags as upstream's release build (selinux support compiled in, test-only code left out).
GO_TAGS=selinux,notest
VERSION_X=()
for pkg in client-go/pkg/version component-base/version; do
  for kv in gitVersion=$K8S_VERSION gitMajor=1 gitMinor=20 gitTreeState=clean; do
    VERSION_X+=("-X k8s.io/kubernetes/vendor/k8s.io/$pkg.$kv")
  done
done
# -s -w: no symbol table or DWARF (the binaries shrink by about a third; nobody debugs them here).
LDFLAGS="-s -w ${VERSION_X[*]}"
PAUSE_CFLAGS="-Os -Wall -Werror -static -DVERSION=v3.4-k8s-$K8S_VERSION"

log() { echo "kube-build: $*" >&2; }

# ---- the cache key -------------------------------------------------------------------------------
# Everything that changes the produced binaries: the patches (names and contents), the compiler and
# every flag. buildDate comes from the Debian changelog, so it is fixed by DEB_SRC_VERSION.
shopt -s nullglob
PATCHES=("$PATCH_DIR"/*.patch)
shopt -u nullglob
if [ ${#PATCHES[@]} -ne 3 ]; then
  log "expected 3 patches in $PATCH_DIR, found ${#PATCHES[@]}"; exit 1
fi
KEY_HASH=$( { for p in "${PATCHES[@]}"; do echo "== $(basename "$p")"; cat "$p"; done
              printf '%s\n' "$GO_PKG" "$GO_TAGS" "$LDFLAGS" "${BINARIES[*]}" "$PAUSE_CFLAGS" \
                "GO111MODULE=off CGO_ENABLED=0 GOOS=linux GOARCH=$(dpkg --print-architecture)" \
                "etcd-server"; } | sha256sum | cut -c1-12)
KEY="$DEB_SRC_VERSION-$KEY_HASH"
ENTRY="$CACHE/$KEY"

point_current() {
  # Atomic switch of the `current` symlink (a new link renamed over the old one).
  ln -sfn "$KEY" "$CACHE/.current.$$"
  mv -T "$CACHE/.current.$$" "$CACHE/current"
}

# ---- warm path: a finished entry exists ---------------------------------------------------------
if [ -f "$ENTRY/READY" ]; then
  [ "$(readlink "$CACHE/current" 2>/dev/null)" = "$KEY" ] || point_current
  log "cached: $ENTRY/bin (key $KEY)"
  echo "$ENTRY/bin"
  exit 0
fi

# ---- cold path -----------------------------------------------------------------------------------
case "$BUILD/" in
  "$REPO"/*) log "CHAOS_KUBE_BUILD_DIR=$BUILD is inside the repository; the k8s tree must stay out of it"; exit 1 ;;
esac
if [ "$(id -u)" != 0 ]; then
  log "no cached build at $ENTRY, and building one needs root (apt-get install/source)."
  log "run: sudo scripts/kube-build.sh   (or set CHAOS_KUBE_CACHE to a cache a root build filled)"
  exit 1
fi

mkdir -p "$CACHE"
# One build at a time: a second caller waits here, then finds READY and takes the warm path.
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  log "another kube-build is running; waiting for it (lock $CACHE/.lock)"
  flock 9
fi
if [ -f "$ENTRY/READY" ]; then
  point_current
  log "cached (built meanwhile by another run): $ENTRY/bin"
  echo "$ENTRY/bin"
  exit 0
fi

STEP="start"
STAGE="$CACHE/.tmp-$KEY-$$"
SUCCESS=0
WALL0=$(date +%s.%N)
hint() {
  case "$STEP" in
    apt*) echo "check the network to deb.debian.org and 'apt-get update' errors; the Debian version $DEB_SRC_VERSION must still be on the mirror (else update DEB_SRC_VERSION and the patches)" ;;
    patch*) echo "a patch no longer applies to this source: regenerate scripts/kube/patches/ against $BUILD/src" ;;
    openapi*) echo "see openapi-gen's output above; the tree is kept in $BUILD for inspection" ;;
    compile*|pause*) echo "see the compiler errors above (an out-of-memory kill shows as 'signal: killed'; the link of kube-apiserver needs about 2 GB); the tree is kept in $BUILD" ;;
    *) echo "see the messages above" ;;
  esac
}
on_exit() {
  local rc=$?
  if [ $SUCCESS != 1 ]; then
    # Never leave a half-written entry: the staging dir and a key dir without READY go.
    rm -rf "$STAGE" "$CACHE/.current.$$"
    [ -f "$ENTRY/READY" ] || rm -rf "$ENTRY"
    [ $rc = 0 ] && rc=1
    log "FAILED during: $STEP (exit $rc). No cache entry was written."
    if [ $rc -ge 129 ]; then
      log "what to do: it was interrupted (signal $((rc - 128))); nothing to fix"
    else
      log "what to do: $(hint)"
    fi
    log "then rerun scripts/kube-build.sh (it starts the build over; rm -rf $BUILD to free its space meanwhile)"
  fi
  exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# CPU seconds (user + system) used so far by this script and every child it waited for: fields
# utime, stime, cutime, cstime of /proc/$$/stat, i.e. what bash `times` prints. ($$ is this shell
# even inside $(...), whose own fork would start from zero.)
TICKS=$(getconf CLK_TCK)
child_cpu() {
  awk -v hz="$TICKS" '{ sub(/^.*\) /, ""); printf "%.1f", ($12 + $13 + $14 + $15) / hz }' "/proc/$$/stat"
}

log "no cached build for key $KEY: building (cache $CACHE, build dir $BUILD)"

# 1. Packages. golang-1.19-go compiles; dpkg-dev gives dpkg-source (apt-get source unpacks with it)
#    and dpkg-parsechangelog; gcc + libc6-dev link the static pause. etcd is not installed (the
#    etcd-server package would start a system etcd on 2379): its .deb is unpacked further down.
STEP="apt: install build tools"
need=()
for p in "$GO_PKG" dpkg-dev gcc libc6-dev patch; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq >/dev/null || log "apt-get update reported errors (above); trying the install anyway"
  # Output kept for a failure only (debconf and needrestart chatter otherwise); no needrestart run.
  apt_log=$(mktemp)
  if ! DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 \
       apt-get install -y -qq --no-install-recommends "${need[@]}" >"$apt_log" 2>&1; then
    cat "$apt_log" >&2; rm -f "$apt_log"; exit 1
  fi
  rm -f "$apt_log"
fi

# 2. The source package. apt-get source needs a deb-src entry; Debian's images ship none. Ours is a
#    separate file, chaos-kube-src.sources (bookworm main, the same mirror and key as the image's
#    debian.sources), so the image's own sources are never edited; it is left in place afterwards
#    (it only adds source indexes to `apt-get update`, and the next build needs it again).
STEP="apt: deb-src for kubernetes=$DEB_SRC_VERSION"
have_src() { apt-cache showsrc kubernetes 2>/dev/null | grep -qx "Version: $DEB_SRC_VERSION"; }
if ! have_src; then
  SRC_FILE=/etc/apt/sources.list.d/chaos-kube-src.sources
  if [ ! -e "$SRC_FILE" ] && ! grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/; then
    log "adding a deb-src entry for bookworm main: $SRC_FILE (left in place)"
    cat > "$SRC_FILE" <<'EOF'
# Added by torch-chaos scripts/kube-build.sh: source packages for `apt-get source kubernetes`.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  apt-get update -qq >/dev/null || log "apt-get update reported errors (above); checking for the source anyway"
  have_src || { log "apt has no source kubernetes=$DEB_SRC_VERSION (apt-cache showsrc kubernetes)"; exit 1; }
fi

case "$BUILD" in /|"$HOME"|/var/tmp|/tmp|/var) log "refusing CHAOS_KUBE_BUILD_DIR=$BUILD (it is deleted)"; exit 1 ;; esac
rm -rf "$BUILD"   # a previous failed build's tree: start clean
mkdir -p "$BUILD/src" "$BUILD/debs"
STEP="apt: source kubernetes=$DEB_SRC_VERSION"
# APT::Sandbox::User=root: the download dir is root's; without it apt warns it cannot drop to _apt.
(cd "$BUILD/src" && apt-get source -qq -o APT::Sandbox::User=root "kubernetes=$DEB_SRC_VERSION" >/dev/null)
STEP="apt: download etcd-server"
(cd "$BUILD/debs" && apt-get download -qq -o APT::Sandbox::User=root etcd-server >/dev/null)
TREE=$(echo "$BUILD"/src/kubernetes-*/)
TREE=${TREE%/}
[ -f "$TREE/go.mod" ] || { STEP="apt: unpack source"; exit 1; }

# 3. The project's patches (each file's header says why).
for p in "${PATCHES[@]}"; do
  STEP="patch: $(basename "$p")"
  patch -p1 -s -N -d "$TREE" < "$p"
done

# GOPATH mode: the tree must sit at $GOPATH/src/k8s.io/kubernetes. Go's build cache goes inside the
# build dir, so deleting it leaves nothing behind in $HOME. No network: GOPROXY=off, GOFLAGS reset.
export GOPATH="$BUILD/gopath" GOCACHE="$BUILD/gocache" GO111MODULE=off CGO_ENABLED=0 \
  GOFLAGS= GOPROXY=off GOROOT="$GOROOT_DIR" PATH="$GOROOT_DIR/bin:$PATH"
unset GOOS GOARCH GOBIN
mkdir -p "$GOPATH/src/k8s.io"
ln -s "$TREE" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"
CPU_BEFORE_COMPILE=$(child_cpu)
WALL_BEFORE_COMPILE=$(date +%s.%N)

# 4. pkg/generated/openapi is generated at build time (upstream's make runs openapi-gen; without it
#    kube-apiserver fails with "undefined: openapi.GetOpenAPIDefinitions"). Same inputs as
#    build/root/Makefile.generated_files: every package outside vendor/ (staging/ under its vendor/
#    name) with a +k8s:openapi-gen= tag, less code-generator and sample-apiserver. Its API-rule
#    report must equal api/api-rules/violation_exceptions.list, as upstream's make checks: a
#    difference means the input set is not upstream's.
STEP="openapi-gen: build the vendored generator"
nice -n 19 go build -p 2 -o "$BUILD/tools/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
STEP="openapi-gen: generate pkg/generated/openapi"
# grep -l exits 1 for a batch of files with no match; only a real error (2) fails the step.
files_matching() { xargs -r grep -l "$1" || [ $? = 123 ]; }
find -H . \( -path ./_\* -o -path ./.\* -o -path ./vendor -o -path ./debian \) -prune \
     -o -type f -name '*.go' -print \
  | sed 's|^\./staging/src/|vendor/|; s|^\./||' \
  | files_matching '^// *+k8s:' | files_matching '+k8s:openapi-gen=' \
  | { grep -Ev '^vendor/k8s\.io/(code-generator|sample-apiserver)/' || true; } \
  | xargs -r -n1 dirname | LC_ALL=C sort -u > "$BUILD/openapi-dirs"
[ -s "$BUILD/openapi-dirs" ] || { log "no +k8s:openapi-gen= packages found"; exit 1; }
log "openapi-gen over $(wc -l < "$BUILD/openapi-dirs") packages"
nice -n 19 "$BUILD/tools/openapi-gen" --logtostderr -v 0 \
  -i "$(sed 's|^|k8s.io/kubernetes/|' "$BUILD/openapi-dirs" | paste -sd,)" \
  -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
  -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
  -r "$BUILD/openapi-violations.report"
diff -u api/api-rules/violation_exceptions.list "$BUILD/openapi-violations.report" >&2

# 5. The binaries: nice 19 and -p 2, since this 2-core machine may be running a test suite beside it.
STEP="compile: ${BINARIES[*]}"
BUILD_DATE=$(date -u -d "@$(dpkg-parsechangelog -l debian/changelog -STimestamp)" +%Y-%m-%dT%H:%M:%SZ)
mkdir -p "$STAGE/bin"
log "compiling ${BINARIES[*]} (go $(go env GOVERSION), nice 19, -p 2)"
targets=()
for b in "${BINARIES[@]}"; do targets+=("./cmd/$b"); done
nice -n 19 go build -p 2 -tags "$GO_TAGS" \
  -ldflags "$LDFLAGS -X k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version.buildDate=$BUILD_DATE -X k8s.io/kubernetes/vendor/k8s.io/component-base/version.buildDate=$BUILD_DATE" \
  -o "$STAGE/bin/" "${targets[@]}"
CPU_COMPILE=$(awk -v a="$(child_cpu)" -v b="$CPU_BEFORE_COMPILE" 'BEGIN { printf "%.1f", a-b }')
WALL_COMPILE=$(awk -v a="$(date +%s.%N)" -v b="$WALL_BEFORE_COMPILE" 'BEGIN { printf "%.1f", a-b }')

# 6. The pod sandbox's pause binary (the image import is the cluster step's job, not this one's).
STEP="pause: gcc -static build/pause/linux/pause.c"
# shellcheck disable=SC2086  # PAUSE_CFLAGS is a list of flags
gcc $PAUSE_CFLAGS -o "$STAGE/bin/pause" build/pause/linux/pause.c
strip "$STAGE/bin/pause"

# 7. etcd from Debian's etcd-server .deb, unpacked, not installed (installing starts a service).
STEP="etcd: unpack etcd-server"
deb=$(echo "$BUILD"/debs/etcd-server_*.deb)
dpkg-deb -x "$deb" "$BUILD/etcd-root"
cp "$BUILD/etcd-root/usr/bin/etcd" "$STAGE/bin/etcd"
ETCD_VERSION=$(dpkg-deb -f "$deb" Version)

# 8. Publish: a quick check that the binaries run, then the entry, then READY last, then `current`.
STEP="check: --version of the built binaries"
for b in "${BINARIES[@]}"; do
  v=$("$STAGE/bin/$b" --version 2>&1)
  [ "$v" = "Kubernetes $K8S_VERSION" ] || { log "$b --version printed '$v', not 'Kubernetes $K8S_VERSION'"; exit 1; }
done
"$STAGE/bin/etcd" --version >/dev/null
STEP="publish: $ENTRY"
CPU_TOTAL=$(child_cpu)
WALL_TOTAL=$(awk -v a="$(date +%s.%N)" -v b="$WALL0" 'BEGIN { printf "%.1f", a-b }')
{
  echo "key: $KEY"
  echo "kubernetes: $K8S_VERSION (Debian source kubernetes $DEB_SRC_VERSION)"
  echo "patches: $(for p in "${PATCHES[@]}"; do basename "$p"; done | paste -sd' ')"
  echo "go: $(go env GOVERSION) ($GO_PKG $(dpkg-query -W -f='${Version}' "$GO_PKG"))"
  echo "go build: GO111MODULE=off CGO_ENABLED=0 -p 2 -tags $GO_TAGS -ldflags '$LDFLAGS -X ...buildDate=$BUILD_DATE'"
  echo "etcd: Debian etcd-server $ETCD_VERSION"
  echo "pause: gcc $PAUSE_CFLAGS (gcc $(gcc -dumpfullversion))"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) CPUs"
  echo "cpu seconds: total $CPU_TOTAL, compile (openapi-gen + go build) $CPU_COMPILE"
  echo "wall seconds: total $WALL_TOTAL, compile $WALL_COMPILE"
} > "$STAGE/BUILDINFO"
rm -rf "$ENTRY"                     # a killed earlier build's entry (no READY), if any
mv -T "$STAGE" "$ENTRY"
date -u +%Y-%m-%dT%H:%M:%SZ > "$ENTRY/READY.tmp"
mv "$ENTRY/READY.tmp" "$ENTRY/READY"
point_current
SUCCESS=1

cd /
rm -rf "$BUILD"
log "built in $WALL_TOTAL s wall, $CPU_TOTAL CPU-s (compile: $WALL_COMPILE s wall, $CPU_COMPILE CPU-s)"
log "binaries in $ENTRY/bin ($CACHE/current/bin):"
(cd "$ENTRY/bin" && for f in *; do printf '  %-26s %7.1f MB\n' "$f" "$(stat -c %s "$f" | awk '{print $1/1e6}')"; done) >&2
log "build dir $BUILD removed"
echo "$ENTRY/bin"
