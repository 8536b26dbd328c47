# Sourced by scripts/build-kube.sh and scripts/build-peers.sh: one entry of the test cache.
#   cache_entry <name> <file the entry must hold> <build script> <paths under scripts/ to key on...>
# sets CACHE_ENTRY to <test cache>/<name>-<key>, the key a hash of those paths' files. An entry
# already there is reused; otherwise, under <test cache>/<name>.lock (concurrent callers wait),
# `bash <build script> <scratch dir>` builds it and the finished directory is moved into place
# whole, and CACHE_BUILT is set.
cache_entry() {
  local name=$1 marker=$2 script=$3
  shift 3
  local scripts key
  scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  key=$(cd "$scripts" && find "$@" -type f ! -name '*~' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
  CACHE_ENTRY=$KNIT_TEST_CACHE/$name-$key
  CACHE_BUILT=
  [[ -x $CACHE_ENTRY/$marker ]] && return 0
  mkdir -p "$KNIT_TEST_CACHE"
  exec 9>"$KNIT_TEST_CACHE/$name.lock"
  flock -n 9 || { echo "build-$name: another build holds $KNIT_TEST_CACHE/$name.lock; waiting"; flock 9; }
  if [[ ! -x $CACHE_ENTRY/$marker ]]; then
    local scratch=$KNIT_TEST_CACHE/.build-$name-$key
    rm -rf "$scratch"
    bash "$script" "$scratch"
    mv "$scratch" "$CACHE_ENTRY"
    CACHE_BUILT=1
  fi
  exec 9>&-
}
