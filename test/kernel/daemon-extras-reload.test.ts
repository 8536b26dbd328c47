// Config reload without a restart: the daemon follows its config file. A valid change is
// applied (a new network gets its bridge, pods can attach to it); an invalid one is reported
// with file:line and key while the running config stays.
import test from 'ava';
import { readFileSync, writeFileSync } from 'node:fs';
import {
  startDaemon, cleanupDaemon, makeNetns, removeNetns, ipJson, pingFrom, eventually, hostLinks, removeLinkQuietly, freePort, type Daemon,
} from '../helpers/daemon.js';

const P = 'krl';
const SUBNET = '10.234.3.0/24';
const SUBNET2 = '10.234.4.0/24';
const BRIDGE2 = `${P}br2`;
const NET2 = `${P}net2`;
let d: Daemon | undefined;
let metricsBase = '';
const opts = { prefix: P, subnet: SUBNET, config: {} as Record<string, unknown> };
const netnsNames: string[] = [];
const ids: string[] = [];

const second = { name: NET2, mode: 'bridge', bridge: BRIDGE2, ipv4: { subnet: SUBNET2 } };

function readConfig(): any {
  return JSON.parse(readFileSync(d!.configPath, 'utf8'));
}

function writeConfig(cfg: unknown): void {
  writeFileSync(d!.configPath, JSON.stringify(cfg, null, 2));
}

async function metrics(): Promise<string> {
  return (await fetch(`${metricsBase}/metrics`)).text();
}

const networkNames = async () => (await d!.call('NodeStatus', {})).networks.map((n: any) => n.name);
const logLines = () => d!.logs.flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });

async function eventuallyAsync<T>(fn: () => Promise<T | undefined | false>, what: string, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test.before(async () => {
  const port = await freePort();
  metricsBase = `http://127.0.0.1:${port}`;
  opts.config = { metricsAddress: `127.0.0.1:${port}` };
  removeLinkQuietly(`${P}br3`);
  removeLinkQuietly(BRIDGE2); // a leftover of an interrupted run
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeLinkQuietly(BRIDGE2);
  removeLinkQuietly(`${P}br3`);
  for (const n of netnsNames) removeNetns(n);
});

test.serial('adding a network to the file brings it up: NodeStatus lists it, ip shows its bridge, a pod attaches to it', async (t) => {
  t.deepEqual(await networkNames(), [`${P}net`]);
  t.false(hostLinks().some((l) => l.ifname === BRIDGE2));

  const cfg = readConfig();
  cfg.networks.push(second);
  writeConfig(cfg);

  await eventuallyAsync(async () => (await networkNames()).includes(NET2), 'NodeStatus lists the new network');
  const s = await d!.call('NodeStatus', {});
  const n2 = s.networks.find((n: any) => n.name === NET2);
  t.true(n2.ready);
  t.is(n2.pools[0].subnet, SUBNET2);
  await eventually(() => hostLinks().some((l) => l.ifname === BRIDGE2), `${BRIDGE2} exists`);
  const [br] = ipJson(['link', 'show', 'dev', BRIDGE2]);
  t.is(br.linkinfo.info_kind, 'bridge');
  t.is(br.ifalias, `knit-${P}:network=${NET2}`);
  const [addr] = ipJson(['addr', 'show', 'dev', BRIDGE2]);
  t.true(addr.addr_info.some((a: any) => a.local === '10.234.4.1' && a.prefixlen === 24));
  t.true(logLines().some((l) => l.msg === 'config reloaded'));

  const name = `${P}-pod1`;
  netnsNames.push(name);
  ids.push(`${P}-sb1`);
  const nsPath = makeNetns(name);
  const { result } = await d!.call('Attach', {
    sandbox_id: `${P}-sb1`, pod_name: 'p1', pod_namespace: 'r', pod_uid: 'u1', netns_path: nsPath, runtime: 'RUNC',
    interfaces: [{ name: 'eth0', network: NET2 }],
  });
  t.regex(result.ips[0].address, /^10\.234\.4\.\d+\/24$/);
  const hostEnd = result.interfaces.find((i: any) => !i.sandbox).name;
  t.is(ipJson(['link', 'show', 'dev', hostEnd])[0].master, BRIDGE2);
  t.true(pingFrom(name, '10.234.4.1'), 'the pod pings the new bridge');
});

test.serial('/metrics reports the pools of a network added by reload', async (t) => {
  const s = await d!.call('NodeStatus', {});
  const pool = s.networks.find((n: any) => n.name === NET2).pools[0];
  const text = await metrics();
  t.true(text.includes(`knit_pool_addresses_used{family="4",network="${NET2}"} ${pool.used}\n`), text);
  t.true(text.includes(`knit_pool_addresses_total{family="4",network="${NET2}"} ${pool.size}\n`), text);
});

test.serial('an invalid rewrite is rejected naming file:line and key; the running config stays and the daemon keeps serving', async (t) => {
  const before = await d!.call('NodeStatus', {});
  const good = readConfig();
  const bad = structuredClone(good);
  bad.networks[1].ipv4.subnet = '10.234.4.0/33';
  bad.networks.push({ name: `${P}net3`, bridge: `${P}br3`, ipv4: { subnet: '10.234.5.0/24' } });
  writeConfig(bad);

  const line = readFileSync(d!.configPath, 'utf8').split('\n').findIndex((l) => l.includes('10.234.4.0/33')) + 1;
  const rejected = await eventually(
    () => logLines().find((l) => /config reload rejected/.test(l.msg) && String(l.err).includes('/33')),
    'the reload rejection in the log',
  );
  t.true(String(rejected.err).includes(`${d!.configPath}:${line}: networks[1].ipv4.subnet:`), rejected.err);
  t.true(rejected.level >= 50, 'logged as an error');
  t.is(d!.child.exitCode, null, 'the daemon is still running');
  t.deepEqual(await d!.call('NodeStatus', {}), before, 'NodeStatus unchanged');
  t.false(hostLinks().some((l) => l.ifname === `${P}br3`), 'nothing of the rejected file was applied');

  // Fixing the file applies it: the rejection did not stop the watch.
  good.networks.push({ name: `${P}net3`, bridge: `${P}br3`, ipv4: { subnet: '10.234.5.0/24' } });
  writeConfig(good);
  await eventuallyAsync(async () => (await networkNames()).includes(`${P}net3`), 'the corrected file is applied');
  await eventually(() => hostLinks().some((l) => l.ifname === `${P}br3`), `${P}br3 exists`);
  t.pass();
});

test.serial('requiredExtensions changed by reload: the node turns not ready naming it, and ready again when it is dropped', async (t) => {
  const cfg = readConfig();
  cfg.requiredExtensions = [`${P}-mesh`];
  writeConfig(cfg);
  const s = await eventuallyAsync(async () => {
    const st = await d!.call('NodeStatus', {});
    return !st.ready && st;
  }, 'not ready');
  t.regex(s.message, new RegExp(`required extension ${P}-mesh is not registered`));
  t.is((await fetch(`${metricsBase}/readyz`)).status, 503);
  cfg.requiredExtensions = [];
  writeConfig(cfg);
  await eventuallyAsync(async () => (await d!.call('NodeStatus', {})).ready, 'ready again');
  t.is((await fetch(`${metricsBase}/readyz`)).status, 200);
});

test.serial('removing an unused network by reload takes it out of NodeStatus and /metrics; the daemon keeps serving', async (t) => {
  // The network the daemon started with: /metrics must not keep asking for its pools.
  const cfg = readConfig();
  cfg.networks = cfg.networks.filter((n: any) => n.name !== `${P}net`);
  writeConfig(cfg);
  await eventuallyAsync(async () => !(await networkNames()).includes(`${P}net`), `${P}net gone from NodeStatus`);
  await eventually(() => !hostLinks().some((l) => l.ifname === `${P}br`), 'the bridge knit made for the dropped network is gone');
  const res = await fetch(`${metricsBase}/metrics`);
  t.is(res.status, 200);
  const text = await res.text();
  t.false(text.includes(`network="${P}net"`), 'no series for a network that is gone');
  t.true(text.includes(`knit_pool_addresses_used{family="4",network="${NET2}"}`));
  t.is(d!.child.exitCode, null, 'the daemon is still running');
  t.truthy(await d!.call('NodeStatus', {}));
});

test.serial('removing a network whose addresses are in use is refused and the network keeps working', async (t) => {
  const cfg = readConfig();
  cfg.networks = cfg.networks.filter((n: any) => n.name !== NET2);
  const rejectedBefore = logLines().filter((l) => /config reload rejected/.test(l.msg)).length;
  writeConfig(cfg);
  const rejected = await eventually(
    () => logLines().filter((l) => /config reload rejected/.test(l.msg)).slice(rejectedBefore)[0],
    'the reload rejection in the log',
  );
  t.regex(String(rejected.err), new RegExp(`network "${NET2}"`));
  t.true((await networkNames()).includes(NET2));
  t.true(pingFrom(`${P}-pod1`, '10.234.4.1'));
  await d!.call('Detach', { sandbox_id: `${P}-sb1` });
});
