#!/usr/bin/env bash
# Build the network-policy-api conformance suite (README "NetworkPolicy", the ClusterNetworkPolicy
# paragraph) from the Go module proxy, at the release of scripts/network-policy-api/version.env:
#   bin/conformance.test      `go test -c` of sigs.k8s.io/network-policy-api/conformance
#   crds/standard.yaml        the release's ClusterNetworkPolicy CRD, standard channel
#   crds/experimental.yaml    the same, experimental channel (named ports, nodes peers)
#   images/agnhost.tar        the agnhost:2.45 its pods run, from the Kubernetes conformance
#                             entry's agnhost (scripts/build-conformance.sh) with its SCTP in
#                             user space, as this kernel has none (network-policy-api/agnhost-image.sh)
#   images/agnhost-e2e.tar    the same under the name of the Kubernetes e2e suite's agnhost (2.56),
#                             for the NetworkPolicy suite's [Feature:SCTPConnectivity] specs
#                             (test/conformance/main.ts imports it over the unmodified one)
#   bin/usctp                 that user-space SCTP (network-policy-api/usctp: pion/sctp over raw IP)
# The suite reads the release from the CRD's bundle-version annotation and refuses another, so
# both come from the one module. With no argument the output is <test cache>/cnp-conformance-<key>
# (scripts/lib/cache-entry.sh; the last line printed is its path); with one, that directory.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/network-policy-api/version.env"
source "$here/kube/go-env.sh"

if [[ $# == 0 ]]; then
  source "$here/lib/cache-entry.sh"
  cache_entry cnp-conformance bin/conformance.test "${BASH_SOURCE[0]}" build-cnp-conformance.sh network-policy-api kube/go-env.sh lib \
    build-conformance.sh conformance kube/versions.env
  echo "$CACHE_ENTRY"
  exit 0
fi
out=$1
command -v go >/dev/null || { echo "build-cnp-conformance: go is not installed" >&2; exit 1; }
mkdir -p "$out/bin" "$out/crds" "$out/images" "$GOCACHE" "$GOMODCACHE"
out=$(cd "$out" && pwd)
# usctp's go.sum is committed: a build that would need another module fails.
(cd "$here/network-policy-api/usctp" && GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
  go build -trimpath -ldflags "-s -w" -o "$out/bin/usctp" .)
kube_conformance=$(bash "$here/build-conformance.sh" | tail -1)
bash "$here/network-policy-api/agnhost-image.sh" "$kube_conformance/images/agnhost.tar" "$out/bin/usctp" "$out/images/agnhost.tar" \
  registry.k8s.io/e2e-test-images/agnhost:2.45 # conformance/base/manifests.yaml of the suite
e2e_agnhost=$(awk '$1 == "e2e" && $3 == "agnhost" { print $2 }' "$kube_conformance/images/list.txt")
[[ -n $e2e_agnhost ]] || { echo "build-cnp-conformance: no agnhost in $kube_conformance/images/list.txt" >&2; exit 1; }
bash "$here/network-policy-api/agnhost-image.sh" "$kube_conformance/images/agnhost.tar" "$out/bin/usctp" "$out/images/agnhost-e2e.tar" "$e2e_agnhost"
cd "$here/network-policy-api"
# The sums are committed (pin.sh): a build that would need another module fails.
export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
echo "build-cnp-conformance: network-policy-api $NETWORK_POLICY_API_VERSION, $(go version)"
go test -c -trimpath -ldflags "-s -w" -o "$out/bin/conformance.test" sigs.k8s.io/network-policy-api/conformance
mod=$(go list -m -f '{{.Dir}}' sigs.k8s.io/network-policy-api)
for channel in standard experimental; do
  cp "$mod/config/crd/$channel/policy.networking.k8s.io_clusternetworkpolicies.yaml" "$out/crds/$channel.yaml"
done
echo "$NETWORK_POLICY_API_VERSION" >"$out/version"
echo "build-cnp-conformance: done"
