// The bench's own Kubernetes API calls: admin over mTLS with a keep-alive pool, so the client is
// not what bounds the create rate, and the Node objects both agents read. Each answers the wall
// time (ms since the epoch, sub-ms) at which the API server's answer was complete.
import https from 'node:https';
import { readFileSync } from 'node:fs';

export const now = () => performance.timeOrigin + performance.now();

/** An admin client of the test control plane (test/fixtures/kube-cluster.ts). */
export function adminApi(cp, inFlight) {
  const agent = new https.Agent({ keepAlive: true, maxSockets: inFlight, ca: cp.caPem, cert: readFileSync(cp.pki.admin.cert), key: readFileSync(cp.pki.admin.key) });
  const url = new URL(cp.server);
  const call = (method, path, body, contentType = 'application/json') =>
    new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = https.request({ agent, host: url.hostname, port: url.port, method, path, headers: data ? { 'content-type': contentType, 'content-length': Buffer.byteLength(data) } : {} }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d) => (text += d));
        res.on('end', () => {
          const at = now();
          if (res.statusCode >= 300) reject(Object.assign(new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 300)}`), { status: res.statusCode, body: text }));
          else resolve({ at, body: JSON.parse(text) });
        });
      });
      req.on('error', reject);
      req.end(data);
    });
  return {
    /** Any request: (method, path, body, content type) → { at, body }. */
    call,
    createNode: (node) => call('POST', '/api/v1/nodes', node),
    deleteNode: (name) => call('DELETE', `/api/v1/nodes/${name}`),
    patchNode: (name, patch) => call('PATCH', `/api/v1/nodes/${name}`, patch, 'application/merge-patch+json'),
    patchNodeStatus: (name, patch) => call('PATCH', `/api/v1/nodes/${name}/status`, patch, 'application/merge-patch+json'),
    close: () => agent.destroy(),
  };
}

/** What flannel's kube subnet manager requires of a Node before it routes it (its
 * pkg/subnet/kube: the default prefix, and the annotations a backend writes on its own node).
 * host-gw's backend-data is the JSON of no data; vxlan's names the VNI and the node's VTEP MAC
 * (its pkg/backend/vxlan). Nodes without kube-subnet-manager "true" it skips. */
const FLANNEL = 'flannel.alpha.coreos.com/';
export const FLANNEL_PUBLIC_IP = `${FLANNEL}public-ip`;
export const flannelAnnotations = ({ ip, mac }, backend) => ({
  [`${FLANNEL}kube-subnet-manager`]: 'true',
  [`${FLANNEL}backend-type`]: backend,
  [`${FLANNEL}backend-data`]: backend === 'vxlan' ? JSON.stringify({ VNI: 1, VtepMAC: mac }) : 'null',
  [FLANNEL_PUBLIC_IP]: ip,
});

/** A Node as a kubelet registers it (addresses in the create), with the podCIDR the allocator
 * gives and flannel's annotations when podCIDR is set (the node's flanneld writes those once
 * the node has one). knit reads spec.podCIDRs and the InternalIP; flannel the spec and the
 * annotations. */
export function nodeObject(node, backend) {
  const { name, cidr, ip } = node;
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux' }, annotations: cidr ? flannelAnnotations(node, backend) : {} },
    spec: cidr ? { podCIDR: cidr, podCIDRs: [cidr] } : {},
    status: { addresses: [{ type: 'InternalIP', address: ip }, { type: 'Hostname', address: name }] },
  };
}

/** Runs fn over items with at most `width` in flight. */
export async function pool(items, width, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i], i);
      }
    }),
  );
}
