// kube-router's NetworkPolicy controller beside knit's (bench/policy.mjs): the binary from
// scripts/build-kube-router.sh, run in a node netns of its own with only the firewall on, and
// the names it gives its ipsets (its pkg/controllers/netpol/policy.go), so the bench can ask the
// kernel for a policy rule's peers.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';

/** The cache entry's binary (built on first use; a cold build takes a few minutes). */
export function kubeRouterBinary(root) {
  const out = execFileSync('bash', [path.join(root, 'scripts/build-kube-router.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return path.join(out.trim().split('\n').at(-1), 'bin/kube-router');
}

/** RFC 4648 base32, as Go's base32.StdEncoding (the bench needs only the first 16 characters). */
function base32(buf) {
  const A = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of buf) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += A[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return bits ? out + A[(value << (5 - bits)) & 31] : out;
}

/** The ipset of an ingress rule's pod peers: policyIndexedSourcePodIPSetName. */
export const ingressPeerSet = (namespace, policy, rule) =>
  `KUBE-SRC-${base32(createHash('sha256').update(`${namespace}${policy}ingressrule${rule}IPv4pod`).digest()).slice(0, 16)}`;

/** kube-router with the NetworkPolicy controller only (no routing, no service proxy), in `ns`;
 * resolves once it has made its top-level chains (its first sync). */
export async function startKubeRouter({ bin, ns, nodeName, kubeconfig, dir, startService, waitReady }) {
  const svc = startService('kube-router', [
    'ip', 'netns', 'exec', ns, // execs in place: the PID is kube-router's
    bin, `--kubeconfig=${kubeconfig}`, `--hostname-override=${nodeName}`,
    '--run-firewall=true', '--run-router=false', '--run-service-proxy=false', '--health-port=0', '--metrics-port=0',
  ], { log: path.join(dir, 'kube-router.log') });
  const chains = () => execFileSync('ip', ['netns', 'exec', ns, 'iptables', '-S'], { encoding: 'utf8' });
  await waitReady(svc, 'its KUBE-ROUTER-INPUT chain', () => chains().includes('KUBE-ROUTER-INPUT'), 90_000);
  return svc;
}
