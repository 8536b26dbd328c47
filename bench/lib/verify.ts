// Before a contender is timed, one probe sandbox is attached and checked by an independent
// observer (iproute2 and ping): a contender that "succeeds" without doing the work would
// otherwise win the bench. Checks the sandbox has an address in the contender's subnet on
// eth0, a default route via the gateway, that the host end is a port of the bridge, and that
// the gateway answers a ping from inside the netns.
import type { BenchNetwork, Contender, Sandbox } from './contender.js';
import { exec } from './exec.js';

const ipInt = (ip: string) => ip.split('.').reduce((a, o) => a * 256 + Number(o), 0);

function inSubnet(ip: string, subnet: string): boolean {
  const [base, len] = subnet.split('/');
  const size = 2 ** (32 - Number(len));
  return Math.floor(ipInt(ip) / size) === Math.floor(ipInt(base) / size);
}

async function ipJson<T>(args: string[], netns?: string): Promise<T[]> {
  const r = await exec('ip', netns ? ['-n', netns, '-j', ...args] : ['-j', ...args]);
  return JSON.parse(r.stdout || '[]') as T[];
}

/** Throws a sentence naming what is missing. */
export async function verifyAttached(net: BenchNetwork, sb: Sandbox): Promise<void> {
  const where = `sandbox ${sb.id} (netns ${sb.netnsName})`;
  const addrs = await ipJson<{ addr_info: Array<{ family: string; local: string }> }>(['addr', 'show', 'dev', sb.ifname], sb.netnsName).catch(() => []);
  const v4 = addrs.flatMap((a) => a.addr_info).filter((a) => a.family === 'inet');
  if (!v4.some((a) => inSubnet(a.local, net.subnet))) {
    throw new Error(`${where}: ${sb.ifname} has no IPv4 address in ${net.subnet} (has ${v4.map((a) => a.local).join(', ') || 'none'})`);
  }
  const routes = await ipJson<{ gateway?: string }>(['route', 'show', 'default'], sb.netnsName);
  if (!routes.some((r) => r.gateway === net.gateway)) throw new Error(`${where}: no default route via ${net.gateway}`);
  const ports = await ipJson<{ ifname: string }>(['link', 'show', 'master', net.bridge]).catch(() => []);
  if (ports.length === 0) throw new Error(`${where}: bridge ${net.bridge} has no ports`);
  const ping = await exec('ip', ['netns', 'exec', sb.netnsName, 'ping', '-c', '1', '-W', '2', net.gateway], { allowFailure: true });
  if (ping.code !== 0) throw new Error(`${where}: gateway ${net.gateway} does not answer a ping from the sandbox`);
}

/** Attach a probe sandbox, verify it, detach it (always). */
export async function probe(c: Contender, net: BenchNetwork, sb: Sandbox): Promise<void> {
  await c.attach(sb, 'runc');
  try {
    await verifyAttached(net, sb);
  } finally {
    await c.detach(sb);
  }
}
