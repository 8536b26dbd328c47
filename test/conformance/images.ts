// The images `e2e.test --list-images` names that scripts/conformance/images.sh does not build,
// and why no spec of the three suites (suites.ts) needs them. test/unit/conformance-images.test.ts
// checks that every listed image is either built under its exact name or matched here, so a
// Kubernetes bump that brings a new image forces a decision; a conformance run reports any pod
// that still tried to pull (main.ts, "images pulled").
export const NOT_BUILT: { pattern: RegExp; reason: string }[] = [
  {
    pattern: /^registry\.k8s\.io\/(sig-storage\/|e2e-test-images\/volume\/|cloud-provider-gcp\/gcp-compute-persistent-disk)/,
    reason: 'storage drivers and volume servers: [sig-storage] specs only',
  },
  {
    pattern: /^(gcr\.io\/authenticated-image-pulling\/|gcr\.io\/k8s-authenticated-test\/|invalid\.registry\.k8s\.io\/)/,
    reason: 'image-pull specs of [sig-node] (private and invalid registries)',
  },
  {
    pattern: /^registry\.k8s\.io\/e2e-test-images\/(node-perf\/|(apparmor-loader|ipc-utils|nonewprivs|nonroot|perl|kitten|nautilus|resource-consumer|sample-apiserver):)/,
    reason: 'node, apps, auth and API-machinery specs',
  },
  {
    pattern: /^registry\.k8s\.io\/e2e-test-images\/(httpd:|nginx:1\.15-|busybox:1\.36\.)/,
    reason: 'apps and kubectl specs (rolling updates between two versions), storage and DRA manifests',
  },
  {
    pattern: /^registry\.k8s\.io\/etcd:/,
    reason: 'etcd as a pod: control-plane specs',
  },
];
