// The gateway's MAC never moves for VM sandboxes either. A Kata tcfilter guest and a KubeVirt
// bridge guest (real QEMU under TCG) cache the bridge's MAC for their gateway, as does the pod
// netns of a KubeVirt masquerade sandbox. While all three ping the gateway at 5/s (the guests
// through their agent stand-in), runc pods and Kata and KubeVirt sandboxes that were attached
// before them (so that one of them owns the lowest port MAC, which an unpinned bridge would
// take) are detached, and new ones come and go. No reply may be lost, and the bridge keeps the
// gateway MAC throughout. Prefix egw-; subnet 10.236.1.0/24.
import test from 'ava';
import { Cleanup } from '../fixtures/cleanup.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, hostLinks, ipJson, pingFrom, type Daemon } from '../helpers/daemon.js';
import { pinger } from '../helpers/pinger.js';
import { askGuestAgent, launchVm, vmHandoff } from '../helpers/vm-launcher.js';

const P = 'egw';
const GATEWAY = '10.236.1.1';
const GATEWAY_MAC = '0a:58:0a:ec:01:01'; // 0a:58 + 10.236.1.1
/** Pings per pinger: 0.2 s apart, long enough to span the whole churn. */
const PINGS = 60;

type Kind = 'runc' | 'kata' | 'kubevirt-tap' | 'kubevirt-bridge' | 'kubevirt-masquerade';
const runtimeOf: Record<Kind, { runtime: string; binding?: Record<string, string> }> = {
  runc: { runtime: 'RUNC' },
  kata: { runtime: 'KATA', binding: { mode: 'tcfilter' } },
  'kubevirt-tap': { runtime: 'KUBEVIRT', binding: { binding: 'tap' } },
  'kubevirt-bridge': { runtime: 'KUBEVIRT', binding: { binding: 'bridge' } },
  // A declared port keeps ICMP to the pod IP in the pod netns (with none, everything is the guest's).
  'kubevirt-masquerade': { runtime: 'KUBEVIRT', binding: { binding: 'masquerade', ports: 'tcp:8080' } },
};

test.serial('VM guests and a masquerade pod keep their gateway while runc, Kata and KubeVirt sandboxes come and go: no lost reply, the bridge MAC never moves', async (t) => {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const opts = { prefix: P, subnet: '10.236.1.0/24' };
  const ids: string[] = [];
  let d: Daemon | undefined;
  cleanup.defer('stop daemon egw', () => cleanupDaemon(d, opts, ids));
  d = await startDaemon(opts);
  const bridgeMac = () => ipJson(['link', 'show', 'dev', d!.bridge])[0].address as string;

  let n = 0;
  async function attach(kind: Kind) {
    const name = `${P}-${++n}`;
    makeNetns(name);
    cleanup.defer(`remove netns ${name}`, () => removeNetns(name));
    ids.push(name);
    const { runtime, binding } = runtimeOf[kind];
    const req = { sandbox_id: name, netns_path: `/run/netns/${name}`, runtime, interfaces: [{ name: 'eth0', ...(binding ? { binding } : {}) }] };
    const { result } = await d!.call('Attach', req);
    return { id: name, ns: name, result, ip: result.ips[0].address.split('/')[0] as string };
  }
  const detach = (s: { id: string }) => d!.call('Detach', { sandbox_id: s.id });

  // The early ones: every kind, so whichever holds the lowest port MAC goes during the pings.
  const early = [];
  for (const kind of ['runc', 'kata', 'kubevirt-tap', 'runc', 'kubevirt-masquerade'] as Kind[]) early.push(await attach(kind));

  // The talkers: two guests and a masquerade pod whose netns answers the host itself.
  const kata = await attach('kata');
  const bridged = await attach('kubevirt-bridge');
  const masq = await attach('kubevirt-masquerade');
  for (const [s, vm] of [[kata, 'egwk'], [bridged, 'egwb']] as const) {
    const { sandboxId, handoff } = vmHandoff(s.result);
    const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff, by: 'name', name: vm, ping: [GATEWAY] });
    cleanup.defer(`stop guest ${vm}`, () => guest.stop());
    await guest.waitFor(/KNIT-READY/);
    const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
    t.is(verdict, 'OK', `guest ${vm} could not ping its gateway:\n${guest.serial().slice(-1500)}`);
  }
  for (const s of [kata, bridged, masq]) {
    await eventually(() => pingFrom(undefined, s.ip), `the host reaches ${s.id} at ${s.ip}`, 30_000);
  }
  t.is(bridgeMac(), GATEWAY_MAC);

  const guestPinger = (s: { ip: string }) => askGuestAgent(s.ip, `ping ${GATEWAY} ${PINGS}`, 60_000).then((answer) => {
    const m = /^LOST (\d+)$/.exec(answer);
    if (!m) throw new Error(`guest at ${s.ip} answered ${JSON.stringify(answer)} to ping`);
    return Number(m[1]);
  });
  const pings = [guestPinger(kata), guestPinger(bridged), pinger(masq.ns, GATEWAY, PINGS)];
  // The guests' pings are under way before anything moves.
  await new Promise((r) => setTimeout(r, 1000));
  for (const s of early) await detach(s);
  const late = [];
  for (const kind of ['kubevirt-tap', 'runc', 'kata', 'kubevirt-masquerade'] as Kind[]) late.push(await attach(kind));
  for (const s of late) await detach(s);
  const lost = await Promise.all(pings);

  t.deepEqual(lost, [0, 0, 0], 'lost replies to the Kata guest, the KubeVirt bridge guest and the masquerade pod');
  t.is(bridgeMac(), GATEWAY_MAC);
  t.is(ipJson(['neigh', 'show', GATEWAY], masq.ns)[0]?.lladdr, GATEWAY_MAC, 'the masquerade pod caches the gateway MAC');

  for (const s of [kata, bridged, masq]) await detach(s);
  await eventually(() => hostLinks().every((l) => !ids.some((id) => l.ifalias?.includes(`sandbox=${id};`))) || undefined, 'no host link of any sandbox');
});
