# Sourced by scripts/build-image.sh and scripts/conformance/images.sh: a minbase Debian rootfs
# made with debootstrap from Debian's mirror (no base image is pulled), stripped of docs,
# locales and apt lists, every mtime pinned to SOURCE_DATE_EPOCH, kept as a tarball.
#   debian_rootfs <cache dir> <suite> <packages, comma-separated>
# prints the tarball's path, <cache dir>/rootfs-<suite>-<key>.tar, the key a hash of the suite,
# the packages and this function; an existing tarball is reused.
debian_rootfs() {
  local cache=$1 suite=$2 packages=$3
  local key tar work
  key=$(printf '%s\n%s\n%s\n' "$suite" "$packages" "$(declare -f debian_rootfs)" | sha256sum | cut -c1-16)
  tar=$cache/rootfs-$suite-$key.tar
  if [[ ! -s $tar ]]; then
    mkdir -p "$cache"
    work=$(mktemp -d "$cache/rootfs.XXXXXX")
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$work/fs" >&2; then
      rm -rf "$work"
      return 1
    fi
    rm -rf "$work/fs"/usr/share/{doc,man,info,locale,lintian,bash-completion} \
      "$work/fs"/var/lib/apt/lists/* "$work/fs"/var/cache/apt/* "$work/fs"/var/cache/debconf/*-old \
      "$work/fs"/var/log/* "$work/fs"/tmp/* "$work/fs"/etc/machine-id "$work/fs"/etc/hostname
    tar --sort=name --mtime="@${SOURCE_DATE_EPOCH:-1767225600}" --clamp-mtime --numeric-owner --xattrs \
      -C "$work/fs" -cf "$work/rootfs.tar" .
    mv "$work/rootfs.tar" "$tar"
    rm -rf "$work"
  fi
  echo "$tar"
}
