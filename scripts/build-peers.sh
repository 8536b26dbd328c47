#!/usr/bin/env bash
# Build the peers the benches run beside knit from the Go module proxy (bench/README.md,
# "Cluster route convergence"):
#   flanneld   (github.com/flannel-io/flannel, the release pinned in scripts/peers/versions.env)
# With no argument the output is <test cache>/peers-<key>/bin, the key a hash of scripts/peers
# and this script; an existing entry is reused, concurrent callers wait on a lock, and the last
# line printed is the entry's path. With an argument, it builds into that directory. Go's module
# and build caches are the test cluster's (scripts/kube/go-env.sh). Nothing is committed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/peers/versions.env"
source "$here/kube/go-env.sh"

if [[ $# == 0 ]]; then
  key=$(cd "$here" && find build-peers.sh peers -type f ! -name '*~' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
  final=$KNIT_TEST_CACHE/peers-$key
  [[ -x $final/bin/flanneld ]] && { echo "$final"; exit 0; }
  mkdir -p "$KNIT_TEST_CACHE"
  exec 9>"$KNIT_TEST_CACHE/peers.lock"
  flock -n 9 || { echo "build-peers: another build holds $KNIT_TEST_CACHE/peers.lock; waiting"; flock 9; }
  [[ -x $final/bin/flanneld ]] && { echo "$final"; exit 0; }
  scratch=$KNIT_TEST_CACHE/.build-peers-$key
  rm -rf "$scratch"
  bash "${BASH_SOURCE[0]}" "$scratch"
  mv "$scratch" "$final"
  echo "$final"
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
