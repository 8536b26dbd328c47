#!/usr/bin/env bash
# Build the test cluster's binaries from the Go module proxy:
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl  (k8s.io/kubernetes)
#   etcd                                                                  (go.etcd.io/etcd/server/v3)
#   containerd containerd-shim-runc-v2 ctr                                (containerd/v2)
#   crictl                                                                (sigs.k8s.io/cri-tools)
# at the releases pinned in scripts/kube/versions.env, one `go build` per module so the packages
# they share compile once. With no argument the output is <test cache>/kube-<key>/bin, the key a
# hash of everything under scripts/kube and scripts/lib and this script; an existing entry is
# reused, concurrent callers wait on a lock (scripts/lib/cache-entry.sh), and the last line
# printed is the entry's path (what test/fixtures/kube-binaries.ts reads). With an argument, it
# builds into that directory.
# Module downloads and compiled packages stay under the test cache root (go-env.sh), so a
# rebuild after a version bump is incremental. Nothing is fetched but modules through GOPROXY.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/kube/versions.env"
source "$here/kube/go-env.sh"

if [[ $# == 0 ]]; then
  source "$here/lib/cache-entry.sh"
  cache_entry kube bin/kubelet "${BASH_SOURCE[0]}" build-kube.sh kube lib
  if [[ -n $CACHE_BUILT ]]; then
    # The module and build caches stay: a version bump or an edit of this script then rebuilds in
    # about a minute instead of from scratch. KNIT_DROP_GOCACHE=1 trades that for ~4 GB of disk.
    [[ -z ${KNIT_DROP_GOCACHE:-} ]] || go clean -cache
    echo "build-kube: cache entry $(du -sh "$CACHE_ENTRY" | cut -f1), Go module cache $(du -sh "$GOMODCACHE" | cut -f1), Go build cache $(du -sh "$GOCACHE" | cut -f1)"
  fi
  echo "$CACHE_ENTRY"
  exit 0
fi
out=$1
command -v go >/dev/null || { echo "build-kube: go is not installed (need Go >= 1.24)" >&2; exit 1; }
export CGO_ENABLED=0 # every binary here builds static upstream, the kubelet included
mkdir -p "$out/bin" "$GOCACHE" "$GOMODCACHE"
out=$(cd "$out" && pwd)

echo "build-kube: $(go version), cache $KNIT_TEST_CACHE/go, output $out"
started=$SECONDS

build() { # build <module dir> <ldflags> : compile every `tool` of the module into $out/bin
  local name=$1 ldflags=$2 t0=$SECONDS
  echo "build-kube: $name: downloading modules"
  (cd "$here/kube/$name" && go mod download)
  echo "build-kube: $name: downloaded ($((SECONDS - t0)) s); compiling $(cd "$here/kube/$name" && go list tool | xargs -n1 basename | paste -sd' ')"
  # A line a minute so a cold build (tens of minutes on 2 cores) never looks hung.
  ( while sleep 60; do echo "build-kube: $name: still compiling ($((SECONDS - t0)) s)"; done ) &
  local ticker=$!
  local rc=0
  (cd "$here/kube/$name" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out/bin/" tool) || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  ((rc == 0)) || { echo "build-kube: FAILED: $name (go build exit $rc)" >&2; exit "$rc"; }
  echo "build-kube: $name: built in $((SECONDS - t0)) s"
}

kube_minor=${KUBERNETES_VERSION#v1.}; kube_minor=${kube_minor%%.*}
kv=k8s.io/component-base/version
build etcd ""
build kubernetes "-X $kv.gitVersion=$KUBERNETES_VERSION -X $kv.gitMajor=1 -X $kv.gitMinor=$kube_minor \
  -X $kv.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION \
  -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$kube_minor"
build containerd "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION \
  -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
build cri-tools "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION"

cp "$here/kube/versions.env" "$out/versions.env"
echo "build-kube: done in $((SECONDS - started)) s; $(du -sh "$out" | cut -f1) of binaries, $(du -sh "$KNIT_TEST_CACHE/go" | cut -f1) of Go caches"
