// Bandwidth limits hold for VM guests, measured with real traffic. A Kata tcfilter guest and a
// KubeVirt bridge guest (QEMU under TCG) boot on the taps knit made; the host streams data to
// each guest and each guest streams data to the host, through the guest agent stand-in's send
// and recv. The rate the receiving end sees is close to the limit where one is set, and well
// above it where none is (the KubeVirt guest's ingress is left unlimited as the control).
// Detach leaves no ifb and no qdisc. Prefix ebw-; subnet 10.236.2.0/24.
import test from 'ava';
import net from 'node:net';
import { Cleanup } from '../fixtures/cleanup.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, hostLinks, type Daemon } from '../helpers/daemon.js';
import { tc, type Json } from '../helpers/observe.js';
import { askGuestAgent, launchVm, vmHandoff } from '../helpers/vm-launcher.js';

const P = 'ebw';
const LIMIT = 4_000_000; // bits/s
const KIB = 2048; // 2 MiB: about 4 s at the limit
const BYTES = KIB * 1024;
const HOST = '10.236.2.1';

/** The guest streams BYTES to a server on the host; the rate between its first and last byte. */
async function guestSends(guestIp: string): Promise<number> {
  let first = 0;
  let last = 0;
  let got = 0;
  const server = net.createServer((s) => {
    s.on('data', (b) => {
      first ||= performance.now();
      got += b.length;
      last = performance.now();
      if (got >= BYTES) s.destroy(); // busybox nc may wait for the peer to close
    });
  });
  await new Promise<void>((r) => server.listen(0, HOST, r));
  try {
    const { port } = server.address() as net.AddressInfo;
    const answer = await askGuestAgent(guestIp, `send ${HOST} ${port} ${KIB}`, 120_000);
    if (got < BYTES) throw new Error(`the guest at ${guestIp} sent ${got} of ${BYTES} bytes (agent: ${answer})`);
    return (got * 8) / ((last - first) / 1000);
  } finally {
    server.close();
  }
}

/** The host streams BYTES to the guest; the rate until the guest says it has them all. */
async function guestReceives(guestIp: string, port: number): Promise<number> {
  const answered = askGuestAgent(guestIp, `recv ${port}`, 120_000);
  const socket = await connectWhenListening(guestIp, port);
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.end(Buffer.alloc(BYTES), () => resolve());
  });
  const answer = await answered;
  const elapsed = performance.now() - started;
  if (answer !== `GOT ${BYTES}`) throw new Error(`the guest at ${guestIp} answered ${JSON.stringify(answer)}, not GOT ${BYTES}`);
  return (BYTES * 8) / (elapsed / 1000);
}

/** Connects to host:port, retrying while nothing listens there yet (up to 20 s). */
async function connectWhenListening(host: string, port: number): Promise<net.Socket> {
  const until = Date.now() + 20_000;
  for (;;) {
    try {
      return await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect(port, host, () => resolve(s));
        s.once('error', reject);
      });
    } catch (err) {
      if (Date.now() > until) throw new Error(`nothing listens on ${host}:${port}: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

test.serial('VM guests: Kata tcfilter and KubeVirt bridge guests are held near their limits both ways with real traffic; the unlimited direction runs far above; Detach removes the shaping', async (t) => {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const opts = { prefix: P, subnet: '10.236.2.0/24' };
  const ids: string[] = [];
  let d: Daemon | undefined;
  cleanup.defer('stop daemon ebw', () => cleanupDaemon(d, opts, ids));
  d = await startDaemon(opts);

  const sandboxes = [
    { name: `${P}-kata`, runtime: 'KATA', binding: { mode: 'tcfilter' }, bandwidth: { ingress_rate: String(LIMIT), egress_rate: String(LIMIT) } },
    { name: `${P}-kv`, runtime: 'KUBEVIRT', binding: { binding: 'bridge' }, bandwidth: { egress_rate: String(LIMIT) } },
  ];
  const guests = [];
  for (const s of sandboxes) {
    makeNetns(s.name);
    cleanup.defer(`remove netns ${s.name}`, () => removeNetns(s.name));
    ids.push(s.name);
    const { result } = await d.call('Attach', {
      sandbox_id: s.name, netns_path: `/run/netns/${s.name}`, runtime: s.runtime,
      interfaces: [{ name: 'eth0', binding: s.binding, bandwidth: s.bandwidth }],
    });
    const { sandboxId, handoff } = vmHandoff(result);
    const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff, by: 'name', name: s.name });
    cleanup.defer(`stop guest ${s.name}`, () => guest.stop());
    guests.push({ ...s, guest, ip: result.ips[0].address.split('/')[0] as string });
  }
  for (const g of guests) await g.guest.waitFor(/KNIT-READY/);

  const [kata, kv] = guests;
  const rates = {
    kataEgress: await guestSends(kata!.ip),
    kataIngress: await guestReceives(kata!.ip, 9001),
    kvEgress: await guestSends(kv!.ip),
    kvIngressUnlimited: await guestReceives(kv!.ip, 9002),
  };
  t.log(Object.entries(rates).map(([k, v]) => `${k} ${(v / 1e6).toFixed(2)} Mbit/s`).join(', '));
  for (const [what, rate] of Object.entries(rates).filter(([k]) => !k.endsWith('Unlimited'))) {
    t.true(rate > LIMIT * 0.6 && rate < LIMIT * 1.15, `${what}: ${rate} bit/s against a limit of ${LIMIT}`);
  }
  t.true(rates.kvIngressUnlimited > LIMIT * 2, `the unlimited direction ran at ${rates.kvIngressUnlimited} bit/s`);

  for (const g of guests) {
    await g.guest.stop();
    await d.call('Detach', { sandbox_id: g.name });
  }
  await eventually(() => hostLinks().every((l) => !ids.some((id) => l.ifalias?.includes(`sandbox=${id};`))) || undefined, 'no host link (veth, ifb) of either sandbox');
  const shaped = tc(undefined, 'qdisc', 'show').filter((q: Json) => q.kind === 'tbf' || (q.kind === 'ingress' && q.dev?.startsWith(P)));
  t.deepEqual(shaped, [], 'no tbf or ingress qdisc left on the host');
});
