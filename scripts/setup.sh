#!/usr/bin/env bash
# Prepare this machine to build and test knit: Debian packages, node modules, the native
# addon and the TypeScript. Idempotent; run as root on Debian 12 with Node 20 and npm.
# Prints one line per step; on failure prints that step's captured output and exits 1.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive

# Every tool the build and the tests call. qemu-system-x86 is installed without recommends
# (we boot our own kernel, no firmware extras needed). The QEMU fixture downloads a Debian
# kernel package at test time, so apt's package lists must be present too.
APT_PACKAGES=(
  iproute2 runc busybox-static nftables iptables iputils-ping strace containernetworking-plugins
  cmake ninja-build g++ make python3 qemu-system-x86
  util-linux   # nsenter: the QEMU fixture starts the guest inside a netns with it
  conntrack    # host ports: knit flushes a mapping's stale conntrack entries with conntrack -D; NetworkPolicy those of flows it now denies
  tcpdump      # NetworkPolicy with VM runtimes: what reaches a pod's eth0, seen before tc (test/kernel/policy-vm.test.ts)
  dpkg apt     # apt-get download + dpkg-deb -x: the QEMU fixture's kernel and modules
  xz-utils zstd # kernel modules may ship compressed
  file         # tests check what the guest image files are
  podman containerd # unmodified CNI clients of knit-cni (test/e2e/cni-*.test.ts)
  iperf3       # bandwidth limits: test/kernel/bandwidth.test.ts measures the shaped rate; bench/policy.mjs pod-to-pod throughput
  ipset        # kube-router's NetworkPolicy controller beside knit's (bench/policy.mjs) keeps its peers in ipsets
  bird2        # BGP across node netns: test/kernel/cluster-bgp.test.ts (creates group bird, gid 107 here)
  python3-grpcio # the bench's C-core gRPC client (what a Go or C caller of knit pays)
  debootstrap buildah # scripts/build-image.sh: knit's OCI image (test/e2e/image.test.ts)
  umoci        # packs the CRI test's pause image (test/e2e/cni-cri.test.ts, cni-containerd.test.ts)
  openssl      # the test cluster's CA and certificates (test/fixtures/kube-pki.ts)
  # libvirt 9.0, started by the tests only, privately, as virt-launcher starts it
  # (test/e2e/libvirt-kubevirt.test.ts); -system for the libvirt-qemu user the QEMU driver needs
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-system libvirt-clients
  # real DHCP clients, copied with libc into the QEMU guest's initramfs (test/fixtures/guest-programs.ts),
  # and tcpdump on the guest's tap as the wire's witness (test/e2e/guest-dhcp-clients.test.ts)
  isc-dhcp-client dhcpcd-base tcpdump
)
KERNEL_META=linux-image-cloud-amd64 # what test/fixtures/kernel-package.ts resolves

LOG=$(mktemp /tmp/knit-setup.XXXXXX.log)
trap 'rm -f "$LOG"' EXIT
STARTED=$SECONDS

step() { # step "what" cmd args...: run quietly, show its output only when it fails
  local what=$1; shift
  local t0=$SECONDS
  if "$@" >"$LOG" 2>&1; then
    echo "setup: $what ($((SECONDS - t0)) s)"
  else
    local rc=$?
    echo "setup: FAILED: $what (exit $rc): $*" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

fail() { echo "setup: FAILED: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || fail "must run as root (apt-get, netns, runc and tap devices need it)"
command -v node >/dev/null || fail "node is not installed (need Node >= 20)"
command -v npm >/dev/null || fail "npm is not installed"
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 20)) || fail "Node $(node -v) is too old: need >= 20"

missing_packages() {
  local p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
  done
}

apt_lists_present() { apt-cache show "$KERNEL_META" >/dev/null 2>&1; }

# No package may start a system service (libvirtd, containerd, ...): the tests run their own,
# with private paths. policy-rc.d answering 101 is Debian's way to say so (invoke-rc.d(8)).
apt_install() {
  local guard=/usr/sbin/policy-rc.d made=
  if [[ ! -e $guard ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$guard" && chmod 755 "$guard" && made=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
  local rc=$?
  [[ -n $made ]] && rm -f "$guard"
  return $rc
}

mapfile -t missing < <(missing_packages)
if ! apt_lists_present; then
  step "apt-get update (package lists missing)" apt-get update -qq
fi
if ((${#missing[@]})); then
  # Lists can be stale (a mirror dropped an old version): refresh once and retry.
  if ! apt_install "${missing[@]}" >"$LOG" 2>&1; then
    step "apt-get update (install failed with current lists)" apt-get update -qq
    step "apt-get install ${missing[*]}" apt_install "${missing[@]}"
  else
    echo "setup: apt-get install ${missing[*]}"
  fi
else
  echo "setup: apt packages already installed"
fi

if [[ -f package-lock.json ]]; then
  step "npm ci" npm ci --no-audit --no-fund --loglevel=error
else
  step "npm install" npm install --no-audit --no-fund --loglevel=error
fi

step "native addon (cmake-js)" node node_modules/cmake-js/bin/cmake-js compile \
  --directory native --out build/native --log-level warn
step "typescript (tsc)" node node_modules/typescript/bin/tsc -p tsconfig.json
# The e2e fixtures build these on first use too; doing it here keeps concurrent test files
# from each building their own copy (first time: ~10 s, a 27 MB kernel package download).
step "e2e test artifacts (QEMU guest image, runc rootfs)" node build/test/fixtures/warm-cache.js

echo "setup: done in $((SECONDS - STARTED)) s"
