# Sourced by scripts/kube/*.sh and scripts/build-kube.sh: Go works only inside the test cache.
# GOMODCACHE and GOCACHE are shared by every build key, so a version bump downloads and
# compiles only what changed. GOTOOLCHAIN=local: never fetch a Go toolchain.
KNIT_TEST_CACHE=${KNIT_TEST_CACHE:-/var/cache/knit-test}
export GOTOOLCHAIN=local
export GOPATH="$KNIT_TEST_CACHE/go/path"
export GOMODCACHE="$KNIT_TEST_CACHE/go/mod"
export GOCACHE="$KNIT_TEST_CACHE/go/build"
export GOFLAGS="-mod=mod -buildvcs=false"
export GOENV=off
