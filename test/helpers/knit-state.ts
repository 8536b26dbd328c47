// What a refusal must leave as it was, seen two ways: the kernel through iproute2 (links,
// addresses and routes of the netns a test names, the daemon's own first) and knit through its
// API (records and pool usage). Two snapshots compared with deepEqual say "nothing changed".
import { ip, type Json } from './observe.js';
import type { Daemon } from './daemon.js';

/** One netns as `ip -j -d` shows it, without what moves on its own (counters, DAD state,
 * lifetimes, link-local addresses). undefined: the host netns. */
export function netnsState(ns: string | undefined, keep: (link: Json) => boolean = () => true) {
  const kept = ip(ns, 'link', 'show').filter(keep);
  const names = new Set(kept.map((l: Json) => l.ifname));
  const links = kept.map((l: Json) => ({
    ifname: l.ifname, ifindex: l.ifindex, flags: l.flags, mtu: l.mtu, address: l.address, master: l.master,
    ifalias: l.ifalias, kind: l.linkinfo?.info_kind, group: l.group, netns: l.link_netnsid,
  }));
  const addrs = ip(ns, 'addr', 'show').filter((l: Json) => names.has(l.ifname)).flatMap((l: Json) =>
    (l.addr_info ?? []).filter((a: Json) => a.scope !== 'link').map((a: Json) => `${l.ifname} ${a.local}/${a.prefixlen}`),
  );
  const routes = [...ip(ns, 'route', 'show', 'table', 'all'), ...ip(ns, '-6', 'route', 'show', 'table', 'all')]
    .filter((r: Json) => names.has(r.dev) && !String(r.dst).startsWith('fe80') && !String(r.dst).startsWith('ff00'))
    .map((r: Json) => `${r.table ?? 'main'} ${r.type ?? ''} ${r.dst} ${r.gateway ?? ''} ${r.dev ?? ''} ${r.protocol ?? ''} ${r.prefsrc ?? ''}`);
  return { links, addrs: addrs.sort(), routes: routes.sort() };
}

/** The kernel in each netns named and knit's records and pools. undefined names the host's
 * netns, for a daemon that runs there: other tests change it meanwhile, so only this daemon's
 * links are looked at there (its bridge, the bridge's ports, what carries its instance tag). */
export async function knitState(d: Daemon, netns: (string | undefined)[]) {
  const instance = `knit-${d.bridge.slice(0, -2)}:`;
  const ours = (l: Json) => l.ifname === d.bridge || l.master === d.bridge || String(l.ifalias ?? '').startsWith(instance);
  const records = ((await d.call('List', {})).sandboxes ?? []).map((s: Json) => `${s.request?.sandbox_id ?? s.sandbox_id} ${s.state}`).sort();
  const pools = (await d.call('NodeStatus', {})).networks.map((n: Json) => ({ network: n.name, pools: n.pools.map((p: Json) => `${p.subnet} used ${p.used} free ${p.free}`) }));
  return { kernel: netns.map((ns) => ({ ns: ns ?? 'host', ...netnsState(ns, ns ? undefined : ours) })), records, pools };
}
