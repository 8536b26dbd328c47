#!/usr/bin/env bash
# The agnhost image the network-policy-api suite's pods name (conformance/base/manifests.yaml:
# registry.k8s.io/e2e-test-images/agnhost:2.45), made from the Kubernetes conformance run's
# agnhost image (scripts/conformance/images.sh; the agnhost of KUBERNETES_VERSION) with one
# change, for what this machine's kernel lacks: it has no SCTP (CONFIG_IP_SCTP off), so
# agnhost's SCTP sockets do not open (`connect --protocol=sctp` answers "protocol not
# supported", `porter` with SERVE_SCTP_PORT_* exits). Here SCTP's endpoints run in user space
# instead: /usctp (usctp/ beside this script: pion/sctp over raw IP sockets of protocol 132).
# The packets on the wire are genuine SCTP (INIT, INIT-ACK, COOKIE-ECHO, ..., CRC32c), and
# knit's nft rules and conntrack judge them as they would a kernel's; only the endpoints are
# not the kernel's. /agnhost is a wrapper: `connect --protocol=sctp` runs /usctp connect (same
# output and exit codes as agnhost's), `porter` runs /usctp porter, which serves the
# SERVE_SCTP_PORT_* variables itself and the real porter (/agnhost-upstream) without them;
# anything else is the real binary.
#   agnhost-image.sh <agnhost.tar of the conformance entry> <usctp binary> <out.tar> <image name>
set -euo pipefail
src=$1 usctp=$2 out=$3 name=$4
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1767225600}
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
install -m 0755 "$usctp" "$mnt/usctp"
cat >"$mnt/agnhost" <<'WRAP'
#!/bin/sh
# knit's stand-in (scripts/network-policy-api/agnhost-image.sh): this kernel has no SCTP, so
# agnhost's SCTP runs in user space (/usctp: pion/sctp over raw IP; real SCTP on the wire).
case $1 in
porter) exec /usctp porter /agnhost-upstream "$@" ;;
connect)
  prev=
  for arg; do
    case $prev/$arg in */--protocol=sctp | --protocol/sctp) exec /usctp "$@" ;; esac
    prev=$arg
  done ;;
esac
exec /agnhost-upstream "$@"
WRAP
chmod 0755 "$mnt/agnhost"
touch -d "@$SOURCE_DATE_EPOCH" "$mnt/agnhost" "$mnt/agnhost-upstream" "$mnt/usctp"
buildah umount "$ctr" >/dev/null
buildah commit --quiet --format docker --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "docker-archive:$out:$name" >/dev/null
ctr=
echo "build-cnp-conformance: image $name ($(du -h "$out" | cut -f1))"
