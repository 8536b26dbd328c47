#!/usr/bin/env bash
# Build what the Kubernetes conformance run needs beside the test cluster (README "Kubernetes
# conformance"), from the Go module proxy and Debian packages only:
#   bin/e2e.test bin/ginkgo bin/kube-proxy bin/agnhost  (k8s.io/kubernetes, scripts/conformance/kubernetes)
#   bin/regression-issue-74839                          (the same: a Conntrack spec's server)
#   bin/coredns                                         (github.com/coredns/coredns, scripts/conformance/coredns)
#   bin/pause                                           (build/pause/linux/pause.c of the same release, gcc -static)
#   images/*.tar                                        (docker archives named as `e2e.test --list-images`
#                                                        prints them, built by scripts/conformance/images.sh)
# at the releases pinned in scripts/kube/versions.env. With no argument the output is
# <test cache>/conformance-<key>, the key a hash of this script, scripts/conformance,
# scripts/kube/versions.env and go-env.sh, and scripts/lib; an existing entry is reused,
# concurrent callers wait on a lock (scripts/lib/cache-entry.sh), and the last line printed is
# the entry's path (what test/fixtures/conformance-binaries.ts reads). With an argument, it
# builds into that directory. It shares the Go module and build caches with
# scripts/build-kube.sh, so after a kube build most of Kubernetes is compiled already.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/kube/versions.env"
source "$here/kube/go-env.sh"

if [[ $# == 0 ]]; then
  source "$here/lib/cache-entry.sh"
  cache_entry conformance bin/e2e.test "${BASH_SOURCE[0]}" build-conformance.sh conformance kube/versions.env kube/go-env.sh lib
  [[ -z $CACHE_BUILT ]] || echo "build-conformance: cache entry $(du -sh "$CACHE_ENTRY" | cut -f1)"
  echo "$CACHE_ENTRY"
  exit 0
fi
out=$1
command -v go >/dev/null || { echo "build-conformance: go is not installed (need Go >= 1.24)" >&2; exit 1; }
export CGO_ENABLED=0
mkdir -p "$out/bin" "$GOCACHE" "$GOMODCACHE"
out=$(cd "$out" && pwd)
echo "build-conformance: $(go version), cache $KNIT_TEST_CACHE/go, output $out"
started=$SECONDS

# step <label> <module dir> <command...>: one go command in a build module, a line a minute.
step() {
  local label=$1 dir=$2 t0=$SECONDS rc=0
  shift 2
  echo "build-conformance: $label"
  ( while sleep 60; do echo "build-conformance: $label: still compiling ($((SECONDS - t0)) s)"; done ) &
  local ticker=$!
  (cd "$here/conformance/$dir" && "$@") || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  ((rc == 0)) || { echo "build-conformance: FAILED: $label (exit $rc)" >&2; exit "$rc"; }
  echo "build-conformance: $label: done in $((SECONDS - t0)) s"
}

kube_minor=${KUBERNETES_VERSION#v1.}; kube_minor=${kube_minor%%.*}
kv=k8s.io/component-base/version
kube_ldflags="-s -w -X $kv.gitVersion=$KUBERNETES_VERSION -X $kv.gitMajor=1 -X $kv.gitMinor=$kube_minor \
  -X $kv.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION \
  -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$kube_minor"
# The sums of every package below are committed (scripts/conformance/pin.sh): a build that
# would need a module they lack fails instead of editing the checked-in go.mod.
export GOFLAGS="-mod=readonly -buildvcs=false"
step "kubernetes: downloading modules" kubernetes go mod download
step "kubernetes: ginkgo, kube-proxy, agnhost, regression-issue-74839" kubernetes go build -trimpath -ldflags "$kube_ldflags" -o "$out/bin/" tool
step "kubernetes: e2e.test" kubernetes go test -c -trimpath -ldflags "$kube_ldflags" -o "$out/bin/e2e.test" k8s.io/kubernetes/test/e2e
step "coredns: downloading modules" coredns go mod download
step "coredns" coredns go build -trimpath -ldflags "-s -w" -o "$out/bin/" tool

# The sandbox image's binary: upstream's pause.c, built as its Makefile builds it.
kube_dir=$(cd "$here/conformance/kubernetes" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
gcc -Os -Wall -Werror -static -DVERSION="knit-$KUBERNETES_VERSION" -o "$out/bin/pause" "$kube_dir/build/pause/linux/pause.c"

bash "$here/conformance/images.sh" "$out/bin" "$kube_dir" "$out/images"
cp "$here/kube/versions.env" "$out/versions.env"
echo "build-conformance: done in $((SECONDS - started)) s; $(du -sh "$out/bin" | cut -f1) of binaries, $(du -sh "$out/images" | cut -f1) of images"
