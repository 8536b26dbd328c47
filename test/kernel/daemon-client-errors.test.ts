// A caller's mistakes against a real daemon: malformed bodies, bad netns paths, kernel name
// templates, unreachable gateways, duplicate and oversized requests are INVALID_ARGUMENT (or
// RESOURCE_EXHAUSTED for a body over the size limit) naming the field the caller sent, quoting
// at most a short prefix of the bad value, and they change nothing: no record, no address held,
// no device on the host. A valid attach afterwards still works.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, eventually, hostLinks, ipJson, makeNetns, removeNetns, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { kniCall, kniClient, type KniClient } from '../compat/kni-client.js';

const P = uniquePrefix('e9ce').slice(0, -1);
const opts = { prefix: P, subnet: '10.184.1.0/24', subnet6: 'fd00:184:1::/64' };
const ID = `${P}-sb`;
let d: Daemon | undefined;
let kni: KniClient | undefined;
let netnsPath = '';

test.before(async () => {
  netnsPath = makeNetns(`${P}-pod`);
  d = await startDaemon(opts);
  kni = kniClient(d.socket);
});

test.after.always(async () => {
  kni?.close();
  await cleanupDaemon(d, opts, [ID]);
  removeNetns(`${P}-pod`);
});

async function refused(t: ExecutionContext, p: Promise<unknown>, field: string, code = grpc.status.INVALID_ARGUMENT): Promise<grpc.ServiceError> {
  const err = (await t.throwsAsync(p)) as unknown as grpc.ServiceError;
  t.is(err.code, code, `${field}: ${err.details}`);
  if (field) t.deepEqual(err.metadata.get('knit-field'), [field], err.details);
  t.true(err.details.length < 1200, `the message is short (${err.details.length} characters)`);
  return err;
}

/** Nothing changed: no record, no address held, no device of the sandbox on the host or in the pod. */
async function unchanged(t: ExecutionContext) {
  t.is((await d!.call('List', {})).sandboxes.length, 0, 'no record');
  const status = await d!.call('NodeStatus', {});
  t.true(status.networks[0].pools.every((p: { used: string }) => Number(p.used) === 0), 'no address held');
  // A detach leaves the reaper to delete the host end: wait for it, not for a refusal.
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${ID};`)), 'no host device of the sandbox');
  t.pass('no host device');
  t.deepEqual(ipJson(['link', 'show'], `${P}-pod`).map((l) => l.ifname), ['lo'], 'pod netns untouched');
}

const attach = (extra: object) => d!.call('Attach', runcAttachReq(ID, netnsPath, { extra }));

// ---- raw bodies --------------------------------------------------------------------------

const varint = (n: number): number[] => {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
};
const len = (field: number, body: Buffer | string) => {
  const b = Buffer.from(body);
  return Buffer.from([...varint((field << 3) | 2), ...varint(b.length), ...b]);
};

/** google.protobuf.Struct nested `depth` deep: {"a": {"a": {...}}}. */
function nestedStruct(depth: number): Buffer {
  let struct = Buffer.alloc(0);
  for (let i = 0; i < depth; i++) {
    const value = len(5, struct); // Value.struct_value
    struct = len(1, Buffer.concat([len(1, 'a'), len(2, value)])); // Struct.fields entry {key, value}
  }
  return struct;
}

function rawCall(service: string, method: string, body: Buffer): Promise<unknown> {
  const client = new grpc.Client(`unix:${d!.socket}`, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(`/${service}/${method}`, (b: Buffer) => b, (b: Buffer) => b, body, { deadline: Date.now() + 30_000 }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res);
    });
  });
}

test.serial('malformed bodies are INVALID_ARGUMENT about the request, for knit.v1 and KNI alike, and change nothing', async (t) => {
  const idAndNetns = Buffer.concat([len(1, ID), len(5, netnsPath)]);
  const bodies: [string, Buffer][] = [
    ['garbage', Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])],
    ['a length past the end', Buffer.from([0x0a, 0x40, 0x61])],
    ['field number 0', Buffer.from([0x02, 0x01, 0x61])],
    ['a group', Buffer.from([0x0b, 0x0c])],
    // netns_path (5) as a varint: protobufjs would read the varint as a length, then the next
    // bytes as the path, and act on it.
    ['a known field with the wrong wire type', Buffer.concat([len(1, ID), Buffer.from([0x28, netnsPath.length]), Buffer.from(netnsPath)])],
    ['invalid UTF-8 in a string', Buffer.concat([len(1, Buffer.from([0xc3, 0x28])), len(5, netnsPath)])],
    // interfaces[0].device.parameters nested 2,000 deep
    ['a Struct nested 2,000 deep', Buffer.concat([idAndNetns, len(7, Buffer.concat([len(1, 'eth0'), len(6, len(5, nestedStruct(2000)))]))])],
  ];
  for (const [what, body] of bodies) {
    const err = await refused(t, rawCall('knit.v1.Knit', 'Attach', body), '(request)');
    t.regex(err.details, /not a valid request message/, what);
    await refused(t, rawCall('knit.v1.Knit', 'Plan', len(1, body)), '(request)');
    await refused(t, rawCall('kni.KNI', 'AttachInterface', body), '(request)');
  }
  // A body over the size limit never reaches the decoder.
  await refused(t, rawCall('knit.v1.Knit', 'Attach', Buffer.concat([idAndNetns, len(11, Buffer.concat([len(1, 'k'), len(2, Buffer.alloc(5 << 20, 0x61))]))])), '', grpc.status.RESOURCE_EXHAUSTED);
  await unchanged(t);
});

// ---- netns paths --------------------------------------------------------------------------

test.serial('netns paths knit cannot use are INVALID_ARGUMENT naming netns_path, or the KNI field they came in', async (t) => {
  const dir = path.join(d!.dir, 'paths');
  mkdirSync(dir);
  const hostLink = path.join(dir, 'host');
  symlinkSync('/proc/1/ns/net', hostLink);
  const long = `/run/netns/${'x'.repeat(300)}`;

  const mnt = await refused(t, attach({ netns_path: '/proc/1/ns/mnt' }), 'netns_path');
  t.regex(mnt.details, /\/proc\/1\/ns\/mnt/);
  const link = await refused(t, attach({ netns_path: hostLink }), 'netns_path');
  t.regex(link.details, /symbolic link: "\/proc\/1\/ns\/net" is the host's network namespace/);
  const tooLong = await refused(t, attach({ netns_path: long }), 'netns_path');
  t.regex(tooLong.details, /NAME_MAX/);
  await refused(t, d!.call('Plan', { attach: runcAttachReq(ID, hostLink) }), 'attach.netns_path');

  const kniReq = { id: ID, name: 'web', namespace: 'ns' };
  await refused(t, kniCall(kni!, 'AttachInterface', { ...kniReq, isolation: { type: 'namespace', path: hostLink } }), 'isolation.path');
  await refused(t, kniCall(kni!, 'AttachInterface', { ...kniReq, extradata: { netns: '/proc/1/ns/mnt' } }), 'extradata["netns"]');
  await refused(t, kniCall(kni!, 'AttachInterface', { ...kniReq, extradata: { netns: long } }), 'extradata["netns"]');
  await unchanged(t);
});

test.serial('CreateNetwork refuses a prefix that is a file, or through one, or under /proc, and makes nothing', async (t) => {
  const netnsDir = path.join(d!.dir, 'netns');
  mkdirSync(netnsDir, { recursive: true });
  const file = path.join(netnsDir, `${P}-file`);
  writeFileSync(file, 'not a directory\n');
  for (const prefix of [file, path.join(file, 'below'), '/proc/1/ns']) {
    await refused(t, kniCall(kni!, 'CreateNetwork', { name: 'web', namespace: 'ns', netns_path_prefix: prefix }), 'netns_path_prefix');
  }
  t.deepEqual(hostLinks().filter((l) => l.ifname.startsWith(P)).map((l) => l.ifname), [`${P}br`]);
});

// ---- interfaces and addresses ---------------------------------------------------------------

test.serial('an interface name template, a runc binding key, duplicate and unreachable static IPs are refused by Attach and Plan alike', async (t) => {
  const cases: [object, string][] = [
    [{ interfaces: [{ name: 'eth%d' }] }, 'interfaces[0].name'],
    [{ interfaces: [{ name: 'eth0', binding: { mode: 'tcfilter' } }] }, 'interfaces[0].binding.mode'],
    [{ interfaces: [{ name: 'eth0', ips: ['10.184.1.7/24', '10.184.1.7/24'] }] }, 'interfaces[0].ips[1]'],
    [{ interfaces: [{ name: 'eth0', ips: ['10.184.1.7/24'] }, { name: 'eth1', ips: ['10.184.1.7/24'] }] }, 'interfaces[1].ips[0]'],
    // From a /32 the gateway 10.184.1.1 is off-link: the default route could not be added.
    [{ interfaces: [{ name: 'eth0', ips: ['10.184.1.7/32'] }] }, 'interfaces[0].ips[0]'],
    // Outside the subnet, or the gateway itself: Plan used to answer OK for these.
    [{ interfaces: [{ name: 'eth0', ips: ['10.184.9.7/24'] }] }, 'interfaces[0].ips[0]'],
    [{ interfaces: [{ name: 'eth0', ips: ['10.184.1.1/24'] }] }, 'interfaces[0].ips[0]'],
  ];
  for (const [extra, field] of cases) {
    await refused(t, attach(extra), field);
    await refused(t, d!.call('Plan', { attach: runcAttachReq(ID, netnsPath, { extra }) }), `attach.${field}`);
  }
  await unchanged(t);
});

test.serial('oversized requests are refused up front: 100,000 interfaces, 300 KiB of annotations, a 1 MB MAC quoted by a prefix', async (t) => {
  const many = Array.from({ length: 100_000 }, (_, i) => ({ name: `e${i}` }));
  await refused(t, attach({ interfaces: many }), 'interfaces');
  const err = await refused(t, d!.call('Plan', { attach: runcAttachReq(ID, netnsPath, { extra: { interfaces: many } }) }), 'attach.interfaces');
  t.regex(err.details, /100000 entries; the limit is 32/);
  await refused(t, attach({ annotations: { big: 'a'.repeat(300 << 10) } }), 'annotations');
  await refused(t, attach({ labels: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, 'v'])) }), 'labels');

  // A client with default limits (8 KiB of metadata) reads the real status, not a metadata error.
  const mac = await refused(t, attach({ interfaces: [{ name: 'eth0', mac: 'a'.repeat(1 << 20) }] }), 'interfaces[0].mac');
  t.regex(mac.details, /"a{64}"… \(1048576 characters\) is not a MAC address/);
  await unchanged(t);
});

test.serial('after all that, a valid attach with a static address works and detach leaves nothing', async (t) => {
  const r = await attach({ interfaces: [{ name: 'eth0', ips: ['10.184.1.7/24'] }] });
  t.true(r.result.ips.some((ip: { address: string }) => ip.address === '10.184.1.7/24'));
  const addrs = ipJson(['addr', 'show', 'eth0'], `${P}-pod`)[0].addr_info.map((a: { local: string; prefixlen: number }) => `${a.local}/${a.prefixlen}`);
  t.true(addrs.includes('10.184.1.7/24'), `ip -n addr shows ${addrs}`);
  await d!.call('Detach', { sandbox_id: ID });
  await unchanged(t);
});
