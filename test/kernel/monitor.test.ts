// The event Monitor in a netns of the test's own: link and address changes made with `ip -n`
// arrive with the fields `ip -j` reports; overruns are reported; close() leaves nothing.
import test from 'ava';
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { createNetns, deleteNetns } from '../../src/net/netns.js';
import { Monitor, type AddressEvent, type LinkEvent, type NetEvent } from '../../src/net/monitor.js';
import { must } from '../fixtures/exec.js';
import { runChild, tempRunDir, userNetlinkSockets } from '../helpers/ns-fixtures.js';

const WAIT_MS = 10_000;

/** A netns under /run/netns (so `ip -n <name>` works), removed in teardown. */
async function testNetns(t: { teardown: (fn: () => unknown) => void }, prefix: string): Promise<{ pin: string; name: string }> {
  const pin = `/run/netns/${prefix}${process.pid}`;
  await deleteNetns(pin, { ignoreMissing: true }); // a stale one from a crashed run
  await createNetns(pin);
  t.teardown(() => deleteNetns(pin, { ignoreMissing: true }));
  return { pin, name: path.basename(pin) };
}

const ipn = (ns: string, ...args: string[]) => must('ip', ['-n', ns, ...args]);
const isLink = (name: string, more: (e: LinkEvent) => boolean = () => true) => (e: NetEvent): e is LinkEvent =>
  e.type === 'link' && e.name === name && more(e);
const isAddr = (address: string, removed: boolean) => (e: NetEvent): e is AddressEvent =>
  e.type === 'address' && e.address === address && e.removed === removed;

test('link and address changes arrive with the fields ip -j reports', async (t) => {
  const { pin, name } = await testNetns(t, 'km1a-');
  const m = new Monitor(pin, ['link', 'ipv4-addr', 'ipv6-addr']);
  t.teardown(() => m.close());

  let seen = m.waitFor(isLink('km1a-a', (e) => !e.removed), WAIT_MS);
  const peerSeen = m.waitFor(isLink('km1a-b', (e) => !e.removed), WAIT_MS);
  await ipn(name, 'link', 'add', 'km1a-a', 'type', 'veth', 'peer', 'name', 'km1a-b');
  const added = await seen;
  await peerSeen;
  const [observed] = JSON.parse(await ipn(name, '-j', '-d', 'link', 'show', 'km1a-a')) as {
    ifindex: number;
    operstate: string;
    linkinfo: { info_kind: string };
  }[];
  t.is(added.index, observed.ifindex);
  t.is(added.kind, observed.linkinfo.info_kind);
  t.is(added.kind, 'veth');
  t.false(added.up);
  t.is(added.operstate, 'DOWN');

  seen = m.waitFor(isLink('km1a-a', (e) => e.up), WAIT_MS);
  await ipn(name, 'link', 'set', 'km1a-a', 'up');
  const up = await seen;
  t.false(up.lowerUp, 'no carrier while the peer is down');

  seen = m.waitFor(isLink('km1a-a', (e) => e.lowerUp && e.operstate === 'UP'), WAIT_MS);
  await ipn(name, 'link', 'set', 'km1a-b', 'up');
  const carrier = await seen;
  t.true(carrier.up);
  const [now] = JSON.parse(await ipn(name, '-j', 'link', 'show', 'km1a-a')) as { operstate: string; flags: string[] }[];
  t.is(now.operstate, carrier.operstate);
  t.true(now.flags.includes('LOWER_UP'));

  let addr = m.waitFor(isAddr('10.77.0.1', false), WAIT_MS);
  await ipn(name, 'addr', 'add', '10.77.0.1/24', 'dev', 'km1a-a');
  t.like(await addr, { index: added.index, family: 4, prefixLen: 24 });

  addr = m.waitFor(isAddr('fd77::1', false), WAIT_MS);
  await ipn(name, 'addr', 'add', 'fd77::1/64', 'dev', 'km1a-a', 'nodad');
  t.like(await addr, { index: added.index, family: 6, prefixLen: 64 });
  const [info] = JSON.parse(await ipn(name, '-j', 'addr', 'show', 'km1a-a')) as { addr_info: { local: string; prefixlen: number }[] }[];
  t.true(info.addr_info.some((a) => a.local === '10.77.0.1' && a.prefixlen === 24));
  t.true(info.addr_info.some((a) => a.local === 'fd77::1' && a.prefixlen === 64));

  addr = m.waitFor(isAddr('10.77.0.1', true), WAIT_MS);
  await ipn(name, 'addr', 'del', '10.77.0.1/24', 'dev', 'km1a-a');
  t.like(await addr, { index: added.index, family: 4, prefixLen: 24 });
  addr = m.waitFor(isAddr('fd77::1', true), WAIT_MS);
  await ipn(name, 'addr', 'del', 'fd77::1/64', 'dev', 'km1a-a');
  t.like(await addr, { family: 6, prefixLen: 64 });

  seen = m.waitFor(isLink('km1a-a', (e) => !e.up), WAIT_MS);
  await ipn(name, 'link', 'set', 'km1a-a', 'down');
  t.is((await seen).operstate, 'DOWN');

  seen = m.waitFor(isLink('km1a-a', (e) => e.removed), WAIT_MS);
  const peerGone = m.waitFor(isLink('km1a-b', (e) => e.removed), WAIT_MS);
  await ipn(name, 'link', 'del', 'km1a-a');
  t.is((await seen).index, added.index);
  await peerGone;
});

test('only the subscribed groups are delivered', async (t) => {
  const { pin, name } = await testNetns(t, 'km1b-');
  const m = new Monitor(pin, ['ipv4-addr']);
  t.teardown(() => m.close());
  const events: NetEvent[] = [];
  m.on('event', (e) => events.push(e));
  const v4 = m.waitFor(isAddr('10.78.0.1', false), WAIT_MS);
  await ipn(name, 'link', 'set', 'lo', 'up');
  await ipn(name, 'addr', 'add', 'fd78::1/128', 'dev', 'lo');
  await ipn(name, 'addr', 'add', '10.78.0.1/32', 'dev', 'lo');
  await v4;
  t.deepEqual(
    events.filter((e) => e.type !== 'address' || e.family !== 4),
    [],
    'no link or IPv6 events',
  );
});

test('a kernel buffer overrun is reported as an overrun event and the monitor keeps working', async (t) => {
  const { pin, name } = await testNetns(t, 'km1c-');
  const m = new Monitor(pin, ['link'], { receiveBufferBytes: 1 }); // the kernel's minimum
  t.teardown(() => m.close());
  m.pause();
  const batch = Array.from({ length: 40 }, (_, i) => `link add km1c-p${i} type veth peer name km1c-q${i}\n`).join('');
  await must('ip', ['-n', name, '-batch', '-'], { input: batch });
  const overrun = m.waitFor((e) => e.type === 'overrun', WAIT_MS);
  m.resume();
  t.deepEqual(await overrun, { type: 'overrun' });

  const after = m.waitFor(isLink('km1c-p0', (e) => e.up), WAIT_MS);
  await ipn(name, 'link', 'set', 'km1c-p0', 'up');
  t.true((await after).up);
});

test('close() leaves no socket in the netns; in a child process no fd or thread remains and it exits', async (t) => {
  const { pin, name } = await testNetns(t, 'km1d-');
  const base = await userNetlinkSockets(pin);
  const m = new Monitor(pin, ['link', 'ipv4-addr']);
  t.is(await userNetlinkSockets(pin), base + 1, 'the monitor socket lives in the target netns');
  m.close();
  m.close();
  t.true(m.closed);
  t.is(await userNetlinkSockets(pin), base);
  await ipn(name, 'link', 'set', 'lo', 'up'); // no listener error, no crash after close

  const r = (await runChild('monitor', [pin, '200'])) as {
    before: string[];
    after: string[];
    threadsBefore: number;
    threadsAfter: number;
    threadsOpen: number;
    fdsOpen: number;
  };
  t.deepEqual(r.after, r.before);
  t.is(r.threadsAfter, r.threadsBefore);
  t.is(r.threadsOpen, r.threadsBefore + 1, 'one reader thread while open');
  t.is(r.fdsOpen, r.before.length + 2, 'a socket and an eventfd while open');
  t.deepEqual(await runChild('monitor-unref', [pin], 20_000), { open: true }, 'an unref()d monitor does not hold the process');
});

test('bad arguments and non-netns paths are refused with a clear error', (t) => {
  const dir = tempRunDir(t, 'km1e-');
  const file = `${dir}/km1e-regular`;
  writeFileSync(file, '');
  t.throws(() => new Monitor(file, ['link']), { message: /is not a network namespace \(it is a regular file\)/ });
  t.throws(() => new Monitor(`${dir}/km1e-missing`, ['link']), { code: 'ENOENT' } as never);
  t.throws(() => new Monitor(undefined, ['bogus' as 'link']), { message: /groups\[0\] must be 'link', 'ipv4-addr' or 'ipv6-addr'/ });
  t.throws(() => new Monitor(undefined, []), { message: /groups must be a non-empty array/ });
  t.throws(() => new Monitor(undefined, ['link'], { receiveBufferBytes: 0 }), { message: /receiveBufferBytes/ });
});
