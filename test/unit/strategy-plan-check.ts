// Shared by the strategy tests: fixtures for InterfaceInput, and a checker for the rules every
// plan must keep (each object it creates is undone or dies with a device the plan made; it
// touches no device it did not make; names fit IFNAMSIZ; host-wide settings stay untouched).
import type { AttachRequest, InterfaceRequest } from '../../src/base/types.js';
import type { Step, StepAction } from '../../src/base/plan.js';
import type { Allocation, InterfaceInput, NetworkSpec } from '../../src/base/strategy.js';

export const NETNS = '/run/netns/kt-plan-sandbox';
export const SANDBOX = 'sb-0123456789abcdef';

export function network(mode: 'bridge' | 'routed', over: Partial<NetworkSpec> = {}): NetworkSpec {
  return {
    name: 'pods',
    mode,
    ...(mode === 'bridge' ? { bridge: 'knbr0' } : {}),
    mtu: 1450,
    hairpin: true,
    ipv4: { subnet: '10.88.0.0/16', gateway: '10.88.0.1' },
    ipv6: { subnet: 'fd88::/64', gateway: 'fd88::1' },
    routes: [{ dst: '10.96.0.0/12' }],
    ...over,
  };
}

export const V4: Allocation = { family: 4, address: '10.88.0.5', prefixLen: 16, gateway: '10.88.0.1' };
export const V6: Allocation = { family: 6, address: 'fd88::5', prefixLen: 64, gateway: 'fd88::1' };

/** Input for interface `index` of a request with `ifaces`. */
export function makeInput(
  runtime: AttachRequest['runtime'],
  ifaces: InterfaceRequest[],
  opts: { index?: number; mode?: 'bridge' | 'routed'; addresses?: Allocation[]; netns?: string; sandboxId?: string } = {},
): InterfaceInput {
  const request: AttachRequest = {
    sandboxId: opts.sandboxId ?? SANDBOX,
    netnsPath: opts.netns ?? NETNS,
    runtime,
    interfaces: ifaces,
    portMappings: [],
    dns: { nameservers: ['10.96.0.10'], search: ['default.svc.cluster.local'], options: ['ndots:5'] },
    labels: {},
    annotations: {},
  };
  const index = opts.index ?? 0;
  return {
    sandboxId: request.sandboxId,
    netnsPath: request.netnsPath,
    request,
    iface: ifaces[index],
    network: network(opts.mode ?? 'bridge'),
    addresses: opts.addresses ?? [V4],
  };
}

const where = (s: { netns?: string }) => s.netns ?? 'host';

function linkOf(a: StepAction): string | number | undefined {
  return (a as { link?: string | number }).link;
}

/** Every device name the plan creates, with the netns it lands in. */
export function createdLinks(steps: Step[]): { name: string; netns: string }[] {
  const out: { name: string; netns: string }[] = [];
  for (const s of steps) {
    const d = s.do;
    if (d.op === 'link.add') {
      out.push({ name: d.name, netns: where(s) });
      if (d.kind === 'veth') out.push({ name: d.peer.name, netns: d.peer.netns ?? where(s) });
    } else if (d.op === 'tun.add') {
      out.push({ name: d.name, netns: where(s) });
    }
  }
  return out;
}

/** Problems with a plan, one sentence each; [] for a good plan. `external` are devices the plan
 * may use without making them (the network's bridge). */
export function planProblems(steps: Step[], external: { name: string; netns: string }[] = []): string[] {
  const problems: string[] = [];
  const made = new Set<string>();
  const key = (netns: string, name: string | number | undefined) => `${netns}|${name}`;
  const known = (netns: string, name: string | number | undefined) =>
    made.has(key(netns, name)) || (netns !== 'host' && name === 'lo') || external.some((e) => e.netns === netns && e.name === name);

  steps.forEach((s, i) => {
    const ns = where(s);
    const d = s.do;
    const at = `step ${i + 1} (${s.description})`;
    switch (d.op) {
      case 'link.add':
      case 'tun.add': {
        if (Buffer.byteLength(d.name) > 15) problems.push(`${at}: name ${d.name} is longer than 15 bytes`);
        if (s.undo?.op !== 'link.del' || s.undo.link !== d.name) problems.push(`${at}: creates ${d.name} without a link.del of it as undo`);
        if (known(ns, d.name)) problems.push(`${at}: ${d.name} already exists in ${ns}`);
        made.add(key(ns, d.name));
        if (d.op === 'link.add' && d.kind === 'veth') {
          if (Buffer.byteLength(d.peer.name) > 15) problems.push(`${at}: peer name ${d.peer.name} is longer than 15 bytes`);
          made.add(key(d.peer.netns ?? ns, d.peer.name));
          if (d.peer.nameIfTaken) made.add(key(d.peer.netns ?? ns, d.peer.nameIfTaken)); // one of the two
        }
        if (d.op === 'link.add' && 'master' in d && d.master !== undefined && !known(ns, d.master)) problems.push(`${at}: master ${d.master} is not the plan's`);
        if (d.op === 'link.add' && 'parent' in d && !known(ns, d.parent)) problems.push(`${at}: parent ${d.parent} is not the plan's`);
        break;
      }
      case 'link.set':
        if (!known(ns, d.link)) problems.push(`${at}: changes ${d.link} in ${ns}, which the plan did not make`);
        if (d.master != null && !known(ns, d.master)) problems.push(`${at}: enslaves to ${d.master}, which the plan did not make`);
        if (d.name) {
          // A device made under a name of its own takes its final one: later steps use that.
          // (With ignoreMissing: a peer that may have been made under either name takes the first.)
          if (known(ns, d.name) && !d.ignoreMissing) problems.push(`${at}: renames ${d.link} to ${d.name}, which already exists in ${ns}`);
          made.delete(key(ns, d.link));
          made.add(key(ns, d.name));
        }
        break;
      case 'link.evict':
        // Moves aside devices knit tagged for sandboxes that are gone; never the host's.
        if (ns === 'host') problems.push(`${at}: evicts devices in the host netns`);
        if (!d.sparePrefix || !d.claim.startsWith(d.sparePrefix)) problems.push(`${at}: would move aside the sandbox's own live interfaces`);
        if (s.undo || s.retire) problems.push(`${at}: an eviction has nothing to undo`);
        break;
      case 'addr.add':
      case 'route.add':
      case 'neigh.add':
      case 'qdisc.add':
      case 'filter.add': {
        const link = linkOf(d);
        if (link !== undefined && !known(ns, link)) problems.push(`${at}: uses ${link} in ${ns}, which the plan did not make`);
        if (!s.undo && link === undefined) problems.push(`${at}: has no undo and no device to die with`);
        if (d.op === 'filter.add' && !known(ns, d.redirectTo)) problems.push(`${at}: redirects to ${d.redirectTo}, which the plan did not make`);
        break;
      }
      case 'sysctl.set': {
        const dev = /^net\.ipv[46]\.conf\.([^.]+)\./.exec(d.key)?.[1];
        if (dev && dev !== 'all' && dev !== 'default') {
          if (!known(ns, dev)) problems.push(`${at}: sets ${d.key} on a device the plan did not make`);
        } else if (ns === 'host') {
          problems.push(`${at}: sets host-wide ${d.key}`);
        }
        break;
      }
      case 'nft.apply':
        if (ns === 'host') problems.push(`${at}: nft table in the host netns`);
        if (s.undo?.op !== 'nft.delete' || s.undo.family !== d.family || s.undo.table !== d.table) problems.push(`${at}: no nft.delete of ${d.family} ${d.table} as undo`);
        break;
      case 'file.write':
        if (s.undo?.op !== 'file.remove' || s.undo.path !== d.path) problems.push(`${at}: no file.remove of ${d.path} as undo`);
        break;
      default:
        problems.push(`${at}: unexpected op ${d.op}`);
    }
    if (s.undo && 'link' in s.undo && s.undo.op !== 'qdisc.del' && s.undo.op !== 'route.del' && !known(ns, s.undo.link)) {
      problems.push(`${at}: undo touches ${s.undo.link}, which the plan did not make`);
    }
  });
  return problems;
}

export const ops = (steps: Step[]) => steps.map((s) => s.do.op);
export const inNetns = (steps: Step[], netns: string | undefined) => steps.filter((s) => s.netns === netns);
