#!/usr/bin/env bash
# Builds knit's OCI image offline, from Debian packages and the npm packages already installed:
#   1. a minbase bookworm rootfs (debootstrap) with iproute2, nftables, the CNI plugins and
#      conntrack (host ports flush their mappings' entries with it),
#      stripped of docs, locales and apt lists, cached as a tarball keyed by its inputs;
#   2. the host's node binary (Debian bookworm ships node 18; knit needs 20), knit's build
#      output (TypeScript, addon, knit-cni) and its production node_modules;
#   3. assembled with buildah from scratch and committed to containers-storage (so podman sees
#      it), with timestamps pinned to SOURCE_DATE_EPOCH.
# Usage: scripts/build-image.sh [TAG]   (npm run build first). Prints the image id.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(node -p "require('$root/package.json').version")
tag=${1:-localhost/knit:$version}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1767225600} # 2026-01-01T00:00:00Z
cache=${KNIT_IMAGE_CACHE:-/var/cache/knit-test/image}
packages=iproute2,nftables,containernetworking-plugins,libstdc++6,procps,conntrack

# --- 1. rootfs (cached by suite, package list and recipe: scripts/lib/debian-rootfs.sh) ---
source "$root/scripts/lib/debian-rootfs.sh"
rootfs_tar=$(debian_rootfs "$cache" bookworm "$packages")

# --- 2. knit itself: build output and production dependencies ---
app=$(mktemp -d /tmp/knit-image-app.XXXXXX)
ctr=
# buildah takes a lock file in its CNI config dir even for a build that runs nothing: give it a
# private one, so the host's /etc/cni/net.d is left as it was.
cni_conf=$(mktemp -d /tmp/knit-image-cni.XXXXXX)
cleanup() { [[ -n $ctr ]] && buildah rm "$ctr" >/dev/null 2>&1; rm -rf "$app" "$cni_conf"; }
trap cleanup EXIT
mkdir -p "$app/opt/knit/build/native/Release" "$app/usr/local/bin"
cp -a "$root"/{package.json,package-lock.json,bin,proto} "$app/opt/knit/"
cp -a "$root/build/src" "$root/build/runtimes" "$app/opt/knit/build/"
cp "$root/build/native/Release/knit_native.node" "$app/opt/knit/build/native/Release/"
cp "$root/build/native/knit-cni" "$app/opt/knit/build/native/"
# node_modules/. : a worktree's node_modules may be a symlink to another checkout's.
mkdir -p "$app/opt/knit/node_modules" && cp -a "$root/node_modules/." "$app/opt/knit/node_modules/"
(cd "$app/opt/knit" && npm prune --omit=dev --offline --no-audit --no-fund >/dev/null 2>&1)
install -m 0755 "$(readlink -f "$(command -v node)")" "$app/usr/local/bin/node"
ln -s /opt/knit/bin/knit "$app/usr/local/bin/knit"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --numeric-owner --owner=0 --group=0 \
  -C "$app" -cf "$app.tar" opt usr

# --- 3. assemble ---
ctr=$(buildah from --cni-config-dir "$cni_conf" scratch)
buildah add --quiet "$ctr" "$rootfs_tar" / >/dev/null
buildah add --quiet "$ctr" "$app.tar" / >/dev/null
rm -f "$app.tar"
buildah config \
  --env PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin \
  --label org.opencontainers.image.title=knit \
  --label org.opencontainers.image.version="$version" \
  --workingdir /opt/knit \
  --entrypoint '[]' --cmd '["knit","serve","--config","/etc/knit/config.yaml"]' \
  "$ctr"
buildah commit --quiet --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "$tag"
ctr=
