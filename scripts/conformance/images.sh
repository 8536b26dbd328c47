#!/usr/bin/env bash
# The images the conformance run's pods use, built offline (no registry is reachable here) and
# named exactly as `e2e.test --list-images` prints them, so the kubelet finds them in the
# node's containerd and never pulls (every tag is pinned: imagePullPolicy IfNotPresent).
#   scripts/conformance/images.sh <bin dir> <k8s.io/kubernetes module dir> <out dir>
# writes <out dir>/<file>.tar (docker archives, what `ctr images import` reads) and
# <out dir>/list.txt, one "<kind> <image name> <file>" per line: kind `e2e` for the suite's
# images, `addon` for the cluster's own (CoreDNS). README "Kubernetes conformance" says which
# upstream image each stands in for; the contents are below, one function per image.
#
# One Debian bookworm minbase rootfs (scripts/lib/debian-rootfs.sh) carries the tools the
# specs exec in agnhost, jessie-dnsutils and nginx; the Go binaries come from <bin dir>
# (scripts/build-conformance.sh). buildah works on private storage in a scratch dir and
# commits each image straight to its archive, so the machine's containers storage is untouched.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$1 kube=$2 out=$3
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1767225600} # 2026-01-01T00:00:00Z
source "$here/../lib/debian-rootfs.sh"
source "$here/../kube/versions.env"
mkdir -p "$out"

# e2e_image <name in test/utils/image/manifest.go>: the image reference the suite uses for it,
# read from the release's manifest (registry, name, tag), so a version bump renames the images.
e2e_image() {
  local line
  line=$(grep -E "^\s*configs\[$1\] = Config\{list\.[A-Za-z0-9]+, \"[^\"]+\", \"[^\"]+\"\}" "$kube/test/utils/image/manifest.go") ||
    { echo "images: $1 not found in $kube/test/utils/image/manifest.go" >&2; return 1; }
  local reg name tag
  reg=$(sed -E 's/.*Config\{list\.([A-Za-z0-9]+),.*/\1/' <<<"$line")
  name=$(sed -E 's/.*, "([^"]+)", "[^"]+"\}.*/\1/' <<<"$line")
  tag=$(sed -E 's/.*, "([^"]+)"\}.*/\1/' <<<"$line")
  case $reg in
    PromoterE2eRegistry) reg=registry.k8s.io/e2e-test-images ;;
    GcRegistry) reg=registry.k8s.io ;;
    BuildImageRegistry) reg=registry.k8s.io/build-image ;;
    *) echo "images: $1 is in registry $reg, which this script does not map" >&2; return 1 ;;
  esac
  echo "$reg/$name:$tag"
}

# dig and nslookup (bind9-dnsutils), curl, wget, nc with -u (netcat-openbsd), ip and ss
# (iproute2), ping, bash, ps: what the network specs exec inside agnhost; conntrack and iptables
# for distroless-iptables; nginx for the nginx image; busybox-static for the busybox image.
packages=bash,curl,wget,netcat-openbsd,bind9-dnsutils,iproute2,iputils-ping,procps,conntrack,iptables,nginx-light,busybox-static
rootfs=$(debian_rootfs "${KNIT_IMAGE_CACHE:-/var/cache/knit-test/image}" bookworm "$packages")

scratch=$(mktemp -d /tmp/knit-conformance-images.XXXXXX)
created_var_lib_containers=
[[ -e /var/lib/containers ]] || created_var_lib_containers=1
ctr=
cleanup() {
  [[ -z $ctr ]] || buildah rm "$ctr" >/dev/null 2>&1 || true
  # buildah's storage is private; containers/image still keeps a blob-info cache under
  # /var/lib/containers whatever storage it is given: removed if this script made it.
  buildah rm --all >/dev/null 2>&1 || true
  buildah rmi --all --force >/dev/null 2>&1 || true
  [[ -z $created_var_lib_containers ]] || rm -rf /var/lib/containers
  rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/net.d" "$scratch/tmp"
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n' "$scratch/storage" "$scratch/run" >"$scratch/storage.conf"
printf '[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "%s"\n[engine]\nlock_type = "file"\ntmp_dir = "%s"\n' "$scratch/net.d" "$scratch/tmp" >"$scratch/containers.conf"
export CONTAINERS_STORAGE_CONF=$scratch/storage.conf CONTAINERS_CONF=$scratch/containers.conf

: >"$out/list.txt"

# layer <dir>: a tarball of dir's contents, owned by root, timestamps pinned.
layer() {
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --numeric-owner --owner=0 --group=0 \
    -C "$1" -cf "$1.tar" .
  echo "$1.tar"
}

# image <kind> <name> <file> <layer tars...> -- <buildah config args...>
image() {
  local kind=$1 name=$2 file=$3
  shift 3
  local layers=()
  while [[ $1 != -- ]]; do layers+=("$1"); shift; done
  shift
  ctr=$(buildah from --cni-config-dir "$scratch/net.d" scratch)
  for l in "${layers[@]}"; do buildah add --quiet "$ctr" "$l" / >/dev/null; done
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" "$ctr"
  buildah commit --quiet --format docker --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "docker-archive:$out/$file.tar:$name" >/dev/null
  ctr=
  echo "$kind $name $file" >>"$out/list.txt"
  echo "build-conformance: image $name ($(du -h "$out/$file.tar" | cut -f1))"
}

# /etc/passwd and /etc/group of the rootfs, with agnhost's extra user and group appended
# (uid 1000 in gid 50000: a SupplementalGroups spec checks them).
rootfs_file() { tar -xOf "$rootfs" "./$1"; }

# --- agnhost: the rootfs, /agnhost (and /agnhost-2, the entrypoint-tester's name), /coredns
# (DNS specs run `/coredns -conf ...` in agnhost pods), porter's TLS pair in the working dir,
# /uploads (netexec), entrypoint /agnhost with `pause` as the default command, as upstream.
d=$scratch/agnhost; mkdir -p "$d/etc" "$d/uploads"
install -m 0755 "$bin/agnhost" "$d/agnhost"
ln -s agnhost "$d/agnhost-2"
install -m 0755 "$bin/coredns" "$d/coredns"
install -m 0644 "$kube/test/images/agnhost/porter/localhost.crt" "$kube/test/images/agnhost/porter/localhost.key" "$d/"
{ rootfs_file etc/passwd; echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh'; } >"$d/etc/passwd"
{ rootfs_file etc/group; echo 'user-defined-in-image:x:1000:user-defined-in-image'; echo 'group-defined-in-image:x:50000:user-defined-in-image'; } >"$d/etc/group"
image e2e "$(e2e_image Agnhost)" agnhost "$rootfs" "$(layer "$d")" -- \
  --workingdir / --entrypoint '["/agnhost"]' --cmd '["pause"]'

# --- jessie-dnsutils: the rootfs (dig, nslookup) and /coredns, as upstream's Debian + dnsutils.
d=$scratch/jessie; mkdir -p "$d"
install -m 0755 "$bin/coredns" "$d/coredns"
image e2e "$(e2e_image JessieDnsutils)" jessie-dnsutils "$rootfs" "$(layer "$d")" -- \
  --workingdir / --entrypoint '[]' --cmd '["bash"]'

# --- nginx: the rootfs's nginx-light serving its default page on port 80 in the foreground.
# The rootfs recipe empties /var/log; nginx opens /var/log/nginx/error.log before its config.
d=$scratch/nginx; mkdir -p "$d/var/log/nginx"
image e2e "$(e2e_image Nginx)" nginx "$rootfs" "$(layer "$d")" -- \
  --workingdir / --entrypoint '[]' --cmd '["nginx", "-g", "daemon off;"]' --stop-signal SIGQUIT --port 80

# --- busybox: Debian's static busybox with a link per applet, and root's passwd and group.
d=$scratch/busybox; mkdir -p "$d/bin" "$d/etc" "$d/tmp" "$d/root"
tar -xOf "$rootfs" ./usr/bin/busybox >"$d/bin/busybox"; chmod 0755 "$d/bin/busybox"
for a in $("$d/bin/busybox" --list); do [[ $a == busybox || -e $d/bin/$a ]] || ln -s busybox "$d/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$d/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$d/etc/group"
chmod 1777 "$d/tmp"
image e2e "$(e2e_image BusyBox)" busybox "$(layer "$d")" -- --entrypoint '[]' --cmd '["sh"]'

# --- distroless-iptables: the rootfs (iptables, conntrack, a shell); a kube-proxy spec lists
# conntrack entries from a host-network pod of it.
image e2e "$(e2e_image DistrolessIptables)" distroless-iptables "$rootfs" -- --workingdir / --entrypoint '[]' --cmd '["bash"]'

# --- regression-issue-74839: its server (the release's test/images/regression-issue-74839) on
# the rootfs, as upstream's on debian-base.
d=$scratch/regression; mkdir -p "$d"
install -m 0755 "$bin/regression-issue-74839" "$d/regression-issue-74839"
image e2e "$(e2e_image RegressionIssue74839)" regression-issue-74839 "$rootfs" "$(layer "$d")" -- \
  --workingdir / --entrypoint '["/regression-issue-74839"]' --cmd '[]'

# --- pause: upstream's pause.c (bin/pause), as the sandbox image and for the specs' pause pods.
d=$scratch/pause; mkdir -p "$d"
install -m 0755 "$bin/pause" "$d/pause"
image e2e "$(e2e_image Pause)" pause "$(layer "$d")" -- --user 65535:65535 --entrypoint '["/pause"]' --cmd '[]'

# --- CoreDNS, the cluster's DNS (the Deployment kubeadm makes): /coredns alone, as root (the
# Deployment drops every capability but NET_BIND_SERVICE).
d=$scratch/coredns; mkdir -p "$d"
install -m 0755 "$bin/coredns" "$d/coredns"
image addon "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" coredns "$(layer "$d")" -- \
  --entrypoint '["/coredns"]' --cmd '[]' --port 53/udp --port 53/tcp --port 9153/tcp
