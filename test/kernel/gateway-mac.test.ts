// The gateway's MAC never moves. Without an explicit address a Linux bridge takes the lowest MAC
// of its ports and changes it when that port leaves; pods that cached the old MAC for their
// gateway then lose it until their neighbour entry expires. knit pins the bridge's MAC (derived
// from the gateway address), also on a bridge it finds at start-up. Checked with `ip -j` and
// with ping: pods keep pinging the gateway and each other while others come and go, with no
// lost packet.
import test from 'ava';
import {
  startDaemon, cleanupDaemon, ipJson, pingFrom, podFactory, runcAttachReq, type Daemon,
} from '../helpers/daemon.js';
import { pinger } from '../helpers/pinger.js';

const P = 'pgw';
const GATEWAY = '10.170.1.1';
const GATEWAY_MAC = '0a:58:0a:aa:01:01'; // 0a:58 + 10.170.1.1
const opts = { prefix: P, subnet: '10.170.1.0/24' };
let d: Daemon | undefined;
const { pod, netnsNames, ids, removeAll } = podFactory(P);

const bridgeMac = () => ipJson(['link', 'show', 'dev', `${P}br`])[0].address as string;

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeAll();
  void netnsNames;
});

test.serial('the bridge carries the gateway MAC from the start', (t) => {
  t.is(bridgeMac(), GATEWAY_MAC);
});

test.serial('six pods: pods come and go while others ping the gateway and a neighbour without a lost packet', async (t) => {
  const pods = [1, 2, 3, 4, 5, 6].map((n) => pod(n));
  const ips: string[] = [];
  for (const p of pods) {
    const { result } = await d!.call('Attach', runcAttachReq(p.id, p.path));
    ips.push(result.ips[0].address.split('/')[0]);
  }
  const [a, b, c, stay1, stay2, stay3] = pods;
  for (const p of [stay1!, stay2!, stay3!]) t.true(pingFrom(p.ns, GATEWAY), `${p.ns} reaches the gateway`);

  const pings = [pinger(stay1!.ns, GATEWAY, 40), pinger(stay2!.ns, GATEWAY, 40), pinger(stay3!.ns, ips[3]!, 40)];
  // The first pods attached own bridge ports with the lowest or any MAC: detach them, and
  // attach and detach new ones, while the others talk.
  for (const p of [a!, b!, c!]) await d!.call('Detach', { sandbox_id: p.id });
  const late = [pod(7), pod(8)];
  for (const p of late) await d!.call('Attach', runcAttachReq(p.id, p.path));
  for (const p of late) await d!.call('Detach', { sandbox_id: p.id });
  const lost = await Promise.all(pings);

  t.deepEqual(lost, [0, 0, 0], 'lost replies per pinger');
  t.is(bridgeMac(), GATEWAY_MAC);
  for (const p of [stay1!, stay2!]) {
    const entry = ipJson(['neigh', 'show', GATEWAY], p.ns)[0];
    t.is(entry?.lladdr, GATEWAY_MAC, `${p.ns} caches the gateway MAC`);
  }
  for (const p of [stay1!, stay2!, stay3!]) await d!.call('Detach', { sandbox_id: p.id });
});

test.serial('a bridge knit finds at start-up gets the gateway MAC back', async (t) => {
  await d!.stop();
  const { execFileSync } = await import('node:child_process');
  execFileSync('ip', ['link', 'set', 'dev', `${P}br`, 'address', '02:00:00:aa:bb:cc']);
  t.is(bridgeMac(), '02:00:00:aa:bb:cc');
  d = await d!.restart();
  t.is(bridgeMac(), GATEWAY_MAC);
});
