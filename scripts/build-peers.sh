#!/usr/bin/env bash
# Build the peers the benches run beside knit from the Go module proxy (bench/README.md,
# "Cluster route convergence"):
#   flanneld   (github.com/flannel-io/flannel, the release pinned in scripts/peers/versions.env)
# With no argument the output is <test cache>/peers-<key>/bin, the key a hash of scripts/peers,
# scripts/lib and this script; an existing entry is reused, concurrent callers wait on a lock
# (scripts/lib/cache-entry.sh), and the last line printed is the entry's path. With an argument,
# it builds into that directory. Go's module and build caches are the test cluster's
# (scripts/kube/go-env.sh). Nothing is committed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/peers/versions.env"
source "$here/kube/go-env.sh"

if [[ $# == 0 ]]; then
  source "$here/lib/cache-entry.sh"
  cache_entry peers bin/flanneld "${BASH_SOURCE[0]}" build-peers.sh peers lib
  echo "$CACHE_ENTRY"
  exit 0
fi
out=$1
command -v go >/dev/null || { echo "build-peers: go is not installed (flannel $FLANNEL_VERSION needs Go >= 1.26)" >&2; exit 1; }
mkdir -p "$out/bin" "$GOCACHE" "$GOMODCACHE"
out=$(cd "$out" && pwd)
t0=$SECONDS
echo "build-peers: flannel $FLANNEL_VERSION: $(go version), cache $KNIT_TEST_CACHE/go"
# flannel's UDP backend is cgo on amd64; its Makefile builds with cgo there, so do we.
(cd "$here/peers/flannel" && CGO_ENABLED=1 go build -trimpath \
  -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION" -o "$out/bin/flanneld" tool) \
  || { echo "build-peers: FAILED: flannel $FLANNEL_VERSION" >&2; exit 1; }
cp "$here/peers/versions.env" "$out/versions.env"
echo "build-peers: flannel built in $((SECONDS - t0)) s"
