#!/usr/bin/env bash
# Build kube-router, whose NetworkPolicy controller bench/policy.mjs runs beside knit's, from the
# Go module proxy (the release pinned in scripts/kube-router/versions.env). With no argument the
# output is <test cache>/kube-router-<key>/bin/kube-router, the key a hash of scripts/kube-router,
# scripts/lib and this script; an existing entry is reused, concurrent callers wait on a lock
# (scripts/lib/cache-entry.sh), and the last line printed is the entry's path. With an argument,
# it builds into that directory. Go's module and build caches are the test cluster's
# (scripts/kube/go-env.sh). Nothing is committed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/kube-router/versions.env"
source "$here/kube/go-env.sh"

if [[ $# == 0 ]]; then
  source "$here/lib/cache-entry.sh"
  cache_entry kube-router bin/kube-router "${BASH_SOURCE[0]}" build-kube-router.sh kube-router lib
  echo "$CACHE_ENTRY"
  exit 0
fi
out=$1
command -v go >/dev/null || { echo "build-kube-router: go is not installed" >&2; exit 1; }
mkdir -p "$out/bin" "$GOCACHE" "$GOMODCACHE"
out=$(cd "$out" && pwd)
t0=$SECONDS
echo "build-kube-router: $KUBE_ROUTER_VERSION: $(go version), cache $KNIT_TEST_CACHE/go"
# Static, as upstream's Makefile builds it (CGO_ENABLED=0).
(cd "$here/kube-router" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" -o "$out/bin/kube-router" tool) \
  || { echo "build-kube-router: FAILED: $KUBE_ROUTER_VERSION" >&2; exit 1; }
cp "$here/kube-router/versions.env" "$out/versions.env"
echo "build-kube-router: built in $((SECONDS - t0)) s"
