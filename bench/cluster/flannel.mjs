// flanneld beside knit: the release pinned in scripts/peers/versions.env, built from the Go
// module proxy by scripts/build-peers.sh (cached, never committed), run in a node netns of its
// own with the kube subnet manager and the host-gw backend (knit's crossNode: routes) or the
// vxlan one (crossNode: vxlan; VNI 1, the kernel's port 8472, as knit's defaults). Every
// path it writes is the bench's; it masquerades nothing and adds no FORWARD rules, and what it
// does set up (its routes) lives in its netns.
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Builds (or finds in the cache) the peers; answers flanneld's path. */
export function flanneldBinary(root) {
  const script = path.join(root, 'scripts', 'build-peers.sh');
  const r = spawnSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = r.stdout.trim().split('\n');
  for (const l of lines.slice(0, -1)) process.stderr.write(`${l}\n`);
  const bin = path.join(lines.at(-1) ?? '', 'bin', 'flanneld');
  if (r.status !== 0 || !existsSync(bin)) throw new Error(`${script} exited ${r.status}: ${lines.slice(-5).join(' | ')}`);
  return bin;
}

/** Starts flanneld for node `nodeName` in `ns`, its fabric link `iface`; resolves once it has
 * its lease (it writes the subnet file then) and runs its route loop. */
export async function startFlannel({ bin, ns, nodeName, iface, network, backend, kubeconfig, dir, startService, waitReady }) {
  const netConf = path.join(dir, 'net-conf.json');
  const Backend = backend === 'vxlan' ? { Type: 'vxlan', VNI: 1, Port: 8472 } : { Type: backend };
  writeFileSync(netConf, JSON.stringify({ Network: network, EnableIPv4: true, Backend }));
  const subnetFile = path.join(dir, 'subnet.env');
  const flannel = startService('flanneld', [
    'ip', 'netns', 'exec', ns, // execs in place: the PID is flanneld's
    bin,
    `--kubeconfig-file=${kubeconfig}`,
    '--kube-subnet-mgr',
    `--iface=${iface}`,
    `--net-config-path=${netConf}`,
    `--subnet-file=${subnetFile}`,
    '--ip-masq=false',
    '--iptables-forward-rules=false',
    '--healthz-port=0',
  ], { log: path.join(dir, 'flanneld.log'), env: { ...process.env, NODE_NAME: nodeName } });
  await waitReady(flannel, `its subnet file ${subnetFile}`, () => existsSync(subnetFile), 90_000);
  return flannel;
}
