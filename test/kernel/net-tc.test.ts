// ingress/clsact qdiscs and the u32 match-all + mirred redirect filter (Kata's veth<->tap
// splice), checked with `tc -j` and byte for byte against tc's own request.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { NetHandle } from '../../src/net/handle.js';
import { listFilters, listQdiscs } from '../helpers/net-calls.js';
import { planRedirect } from '../../runtimes/common/tc-redirect.js';
import { runSteps, undoSteps } from '../../src/core/executor.js';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';
import { filters, link, netlinkRequests, qdiscs } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

const RTM_NEWTFILTER = 44;

async function setup(t: ExecutionContext, tag: string) {
  const p = uniquePrefix(tag);
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  const veth = `${p}v0`;
  const tap = `${p}tap`;
  await h.run([
    { op: 'link.add', kind: 'veth', name: veth, up: true, peer: { name: `${p}v1` } },
    { op: 'tun.add', name: tap, mode: 'tap' },
  ]);
  return { p, ns, h, veth, tap };
}

test('planRedirect (Kata tcfilter), run by the daemon\'s runner: ingress qdiscs and u32 match-all redirects both ways, seen by tc -j; its undo clears the pod device', async (t) => {
  const { ns, h, veth, tap } = await setup(t, 'knta');
  const runner = new DaemonActionRunner();
  t.teardown(() => runner.close());
  const steps = planRedirect(ns.path, veth, tap);
  await runSteps(steps, runner);
  for (const [from, to] of [[veth, tap], [tap, veth]]) {
    const q = qdiscs(ns.name, from).find((x: any) => x.kind === 'ingress');
    t.like(q, { handle: 'ffff:', parent: 'ffff:fff1' });
    const f = filters(ns.name, from, 'ingress').find((x: any) => x.options?.actions);
    t.like(f, { kind: 'u32', protocol: 'all' });
    t.like(f.options.match, { value: '0', mask: '0' });
    t.like(f.options.actions[0], { kind: 'mirred', mirred_action: 'redirect', direction: 'egress', to_dev: to });

    const viaKnit = await listFilters(h, from, 'ingress');
    t.is(viaKnit.length, 1);
    t.like(viaKnit[0], { kind: 'u32', protocol: 3, redirectTo: link(ns.name, to).ifindex, prio: f.pref });
    t.like((await listQdiscs(h, from)).find((x) => x.kind === 'ingress'), { handle: 'ffff:', parent: 'ffff:fff1', index: link(ns.name, from).ifindex });
  }

  // The pod device outlives the attachment: its qdisc and filter go (the tap's die with the tap).
  t.deepEqual(await undoSteps(steps, steps.length, runner, 'undo'), []);
  t.false(qdiscs(ns.name, veth).some((x: any) => x.kind === 'ingress'));
  t.deepEqual(await listFilters(h, veth, 'ingress'), []);
});

test('clsact egress redirect; filter.del and qdisc.del remove them; ignoreMissing skips what is gone', async (t) => {
  const { ns, h, veth, tap } = await setup(t, 'kntb');
  await h.run([
    { op: 'qdisc.add', link: veth, kind: 'clsact' },
    { op: 'filter.add', link: veth, parent: 'egress', redirectTo: tap, prio: 10 },
    { op: 'filter.add', link: veth, parent: 'ingress', redirectTo: tap, prio: 20 },
  ]);
  t.is(qdiscs(ns.name, veth).find((x: any) => x.kind === 'clsact')?.handle, 'ffff:');
  const eg = filters(ns.name, veth, 'egress').find((x: any) => x.options?.actions);
  t.like(eg, { pref: 10 });
  t.is(eg.options.actions[0].to_dev, tap);
  t.is(filters(ns.name, veth, 'ingress').find((x: any) => x.options?.actions)?.pref, 20);

  await h.run([{ op: 'filter.del', link: veth, parent: 'egress', prio: 10 }]);
  t.deepEqual(filters(ns.name, veth, 'egress'), []);
  t.deepEqual(await listFilters(h, veth, 'egress'), []);
  t.is((await listFilters(h, veth, 'ingress')).length, 1);

  const res = await h.run([
    { op: 'qdisc.del', link: veth, kind: 'clsact' },
    { op: 'qdisc.del', link: veth, kind: 'clsact', ignoreMissing: true },
    { op: 'filter.del', link: veth, parent: 'ingress', ignoreMissing: true },
  ]);
  t.deepEqual(res.slice(1), [{ skipped: true }, { skipped: true }]);
  t.false(qdiscs(ns.name, veth).some((x: any) => x.kind === 'clsact'));
  const err = await t.throwsAsync(h.run([{ op: 'qdisc.del', link: veth, kind: 'clsact' }]));
  t.regex(err!.message, /removing clsact qdisc from/);
});

test('filter.add sends the bytes of `tc filter add dev X ingress protocol all u32 match u8 0 0 action mirred egress redirect dev Y`', async (t) => {
  const { ns, h, veth, tap } = await setup(t, 'kntc');
  await h.run([{ op: 'qdisc.add', link: veth, kind: 'ingress' }]);
  const sent = netlinkRequests('tc', ['-n', ns.name, 'filter', 'add', 'dev', veth, 'ingress', 'protocol', 'all', 'u32', 'match', 'u8', '0', '0', 'action', 'mirred', 'egress', 'redirect', 'dev', tap])
    .filter((b) => b.readUInt16LE(4) === RTM_NEWTFILTER);
  t.is(sent.length, 1);
  t.is(h.encode({ op: 'filter.add', link: veth, parent: 'ingress', redirectTo: tap }).toString('hex'), sent[0].toString('hex'));
  // The kernel took tc's request; knit's identical one adds a second match-all key node.
  t.is(filters(ns.name, veth, 'ingress').filter((x: any) => x.options?.actions).length, 1);
  await h.run([{ op: 'filter.add', link: veth, parent: 'ingress', redirectTo: tap }]);
  const nodes = filters(ns.name, veth, 'ingress').filter((x: any) => x.options?.actions);
  t.is(nodes.length, 2);
  t.true(nodes.every((x: any) => x.options.actions[0].to_dev === tap));
});

test('tbf root qdisc: rate, burst and limit as tc reads them (a rate past 4 GB/s via rate64); qdisc.list reports rate and limit; a tbf of another handle or kind is not deleted', async (t) => {
  const { ns, h, veth } = await setup(t, 'kntd');
  const ifb = `${ns.name.slice(0, 9)}ifb`;
  await h.run([
    { op: 'link.add', kind: 'ifb', name: ifb, up: true, mtu: 9000, alias: 'knit:test' },
    { op: 'qdisc.add', link: veth, kind: 'tbf', rate: 2_500_000, burst: 250_000, limit: 312_500 },
    { op: 'qdisc.add', link: ifb, kind: 'tbf', rate: 5_000_000_000, burst: 1_000_000, limit: 2_000_000 },
  ]);
  const dev = link(ns.name, ifb);
  t.like(dev, { mtu: 9000, ifalias: 'knit:test', linkinfo: { info_kind: 'ifb' } });
  const small = qdiscs(ns.name, veth).find((x: any) => x.kind === 'tbf');
  t.like(small, { handle: '1:', root: true, options: { rate: 2_500_000, burst: 250_000 } }); // tc shows the limit as a latency
  t.like(qdiscs(ns.name, ifb).find((x: any) => x.kind === 'tbf'), { handle: '1:', root: true, options: { rate: 5_000_000_000 } });
  t.like((await listQdiscs(h, veth)).find((x) => x.kind === 'tbf'), { handle: '1:', parent: 'root', rate: 2_500_000, limit: 312_500 });
  t.like((await listQdiscs(h, ifb)).find((x) => x.kind === 'tbf'), { rate: 5_000_000_000, limit: 2_000_000 });

  // A root qdisc that is not knit's tbf (another kind) is left alone, even with ignoreMissing.
  const { execFileSync } = await import('node:child_process');
  execFileSync('tc', ['-n', ns.name, 'qdisc', 'del', 'dev', ifb, 'root']);
  execFileSync('tc', ['-n', ns.name, 'qdisc', 'add', 'dev', ifb, 'root', 'handle', '1:', 'pfifo']);
  t.deepEqual(await h.run([{ op: 'qdisc.del', link: ifb, kind: 'tbf', ignoreMissing: true }]), [{ skipped: true }]);
  t.true(qdiscs(ns.name, ifb).some((x: any) => x.kind === 'pfifo'));
  await h.run([{ op: 'qdisc.del', link: veth, kind: 'tbf' }]);
  t.false(qdiscs(ns.name, veth).some((x: any) => x.kind === 'tbf'));
  t.deepEqual(await h.run([{ op: 'qdisc.del', link: veth, kind: 'tbf', ignoreMissing: true }]), [{ skipped: true }]);
  await t.throwsAsync(h.run([{ op: 'qdisc.add', link: veth, kind: 'tbf', rate: 0, burst: 1, limit: 1 }]), { message: /rate: must be between 1/ });
});
