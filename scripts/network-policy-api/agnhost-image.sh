#!/usr/bin/env bash
# The agnhost image the network-policy-api suite's pods name (conformance/base/manifests.yaml:
# registry.k8s.io/e2e-test-images/agnhost:2.45), made from the Kubernetes conformance run's
# agnhost image (scripts/conformance/images.sh; the agnhost of KUBERNETES_VERSION) with one
# change, a stand-in for what this machine's kernel lacks: it has no SCTP
# (CONFIG_IP_SCTP off), so `agnhost porter` serving SERVE_SCTP_PORT_* exits at once and its
# container would crash-loop, keeping every pod of the suite from becoming Ready. Here /agnhost
# is a wrapper that runs the real binary (/agnhost-upstream) and, for `porter` only, stays up
# after it exits, saying why. The SCTP specs then fail (nothing listens), the others run as
# upstream means them.
#   agnhost-image.sh <agnhost.tar of the conformance entry> <out.tar>
set -euo pipefail
src=$1 out=$2
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1767225600}
name=registry.k8s.io/e2e-test-images/agnhost:2.45
scratch=$(mktemp -d /tmp/knit-cnp-image.XXXXXX)
ctr=
created_var_lib_containers=
[[ -e /var/lib/containers ]] || created_var_lib_containers=1
cleanup() {
  [[ -z $ctr ]] || buildah rm "$ctr" >/dev/null 2>&1 || true
  buildah rmi --all --force >/dev/null 2>&1 || true
  # containers/image keeps a blob-info cache there whatever storage it is given.
  [[ -z $created_var_lib_containers ]] || rm -rf /var/lib/containers
  rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/net.d" "$scratch/tmp" "$scratch/layer"
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n' "$scratch/storage" "$scratch/run" >"$scratch/storage.conf"
printf '[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "%s"\n[engine]\nlock_type = "file"\ntmp_dir = "%s"\n' "$scratch/net.d" "$scratch/tmp" >"$scratch/containers.conf"
export CONTAINERS_STORAGE_CONF=$scratch/storage.conf CONTAINERS_CONF=$scratch/containers.conf

ctr=$(buildah from --quiet --cni-config-dir "$scratch/net.d" "docker-archive:$src")
mnt=$(buildah mount "$ctr")
mv "$mnt/agnhost" "$mnt/agnhost-upstream"
cat >"$mnt/agnhost" <<'WRAP'
#!/bin/sh
# knit's stand-in (scripts/network-policy-api/agnhost-image.sh): this kernel has no SCTP; a
# porter that exits (its SCTP listener cannot open) leaves its container up rather than crash.
if [ "$1" = porter ]; then
  /agnhost-upstream "$@"
  echo "agnhost porter exited ($?); this kernel has no SCTP: staying up without a listener" >&2
  exec sleep infinity
fi
exec /agnhost-upstream "$@"
WRAP
chmod 0755 "$mnt/agnhost"
touch -d "@$SOURCE_DATE_EPOCH" "$mnt/agnhost" "$mnt/agnhost-upstream"
buildah umount "$ctr" >/dev/null
buildah commit --quiet --format docker --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "docker-archive:$out:$name" >/dev/null
ctr=
echo "build-cnp-conformance: image $name ($(du -h "$out" | cut -f1))"
