// Every way a real knit daemon refuses a KNI call, walked one by one, and each refusal read as a
// KNI client reads it: the code is the caller's mistake (never OK, never INTERNAL), the field in
// `knit-field` and at the head of the message is a field of the KNI request the caller sent
// (enumerated from proto/kni/api.proto, not from knit's code), the message names no field only
// knit.v1 has (enumerated from proto/knit/v1/knit.proto), and nothing changed: links, addresses
// and routes (`ip -j`), knit's records and its pool are as they were.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cleanupDaemon, makeNetns, removeNetns, startDaemon, type Daemon } from '../helpers/daemon.js';
import { knitState } from '../helpers/knit-state.js';
import { uniquePrefix } from '../helpers/names.js';
import { kniCall, kniClient, type KniClient } from './kni-client.js';

// ---- field paths, from the protos ---------------------------------------------------------

type Descriptor = { name: string; field: { name: string; type: string; label: string; typeName: string }[]; nestedType: Descriptor[]; options?: { mapEntry?: boolean } | null };
type Definitions = Record<string, { type?: Descriptor }>;

const load = (file: string) => protoLoader.loadSync(path.resolve(file), { keepCase: true }) as unknown as Definitions;
const kniDefs = load('proto/kni/api.proto');
const knitDefs = load('proto/knit/v1/knit.proto');

/** Every field path a message has, in the form errors write them: `isolation.path`,
 * `extradata[key]` for any map key, `port_mappings[].host_port` for any index. */
function fieldPaths(defs: Definitions, pkg: string, message: string, prefix = '', seen = new Set<string>()): string[] {
  const type = defs[`${pkg}.${message}`]?.type;
  if (!type || seen.has(message)) return [];
  const out: string[] = [];
  for (const f of type.field) {
    const p = prefix + f.name;
    const entry = type.nestedType.find((n) => n.name === f.typeName && n.options?.mapEntry);
    const sub = f.type === 'TYPE_MESSAGE' && !entry ? f.typeName.replace(new RegExp(`^\\.?${pkg}\\.`), '') : undefined;
    if (entry) out.push(p, `${p}[key]`);
    else if (f.label === 'LABEL_REPEATED') out.push(p, `${p}[]`, ...(sub ? fieldPaths(defs, pkg, sub, `${p}[].`, new Set([...seen, message])) : []));
    else out.push(p, ...(sub ? fieldPaths(defs, pkg, sub, `${p}.`, new Set([...seen, message])) : []));
  }
  return out;
}

const normalized = (field: string) => field.replace(/\["(?:[^"\\]|\\.)*"\]/g, '[key]').replace(/\[\d+\]/g, '[]');
const leafNames = (paths: string[]) => new Set(paths.flatMap((p) => p.split(/[.[\]]+/).filter((s) => s && s !== 'key')));

/** Every field name of knit.v1's requests and the messages inside them. */
const knitNames = leafNames(
  Object.keys(knitDefs)
    .filter((k) => k.startsWith('knit.v1.') && k.endsWith('Request'))
    .flatMap((k) => fieldPaths(knitDefs, 'knit.v1', k.slice('knit.v1.'.length))),
);

const requestOf: Record<string, string> = {
  AttachInterface: 'AttachInterfaceRequest', AttachNetwork: 'AttachInterfaceRequest',
  DetachInterface: 'DetachInterfaceRequest', DetachNetwork: 'DetachInterfaceRequest',
  QueryPodNetwork: 'QueryPodNetworkRequest', CreateNetwork: 'CreateNetworkRequest', DeleteNetwork: 'DeleteNetworkRequest',
};

test('the KNI field lists come from the proto (a sanity check of the enumeration itself)', (t) => {
  const attach = fieldPaths(kniDefs, 'kni', 'AttachInterfaceRequest');
  for (const p of ['id', 'isolation.path', 'extradata[key]', 'dns_config.servers[]', 'port_mappings[].host_port', 'annotations[key]']) t.true(attach.includes(p), p);
  t.false(attach.includes('netns_path'));
  t.true(fieldPaths(kniDefs, 'kni', 'DeleteNetworkRequest').includes('netns_path'));
  for (const name of ['sandbox_id', 'netns_path', 'pod_name', 'interfaces', 'nameservers']) t.true(knitNames.has(name), name);
});

// ---- the daemon and what the refusals are about -------------------------------------------

const P = uniquePrefix('kref').slice(0, -1);
// A /29: the gateway and a few pods, so the pool can be run dry at the end.
const opts = { prefix: P, subnet: '10.231.13.0/29' };
const A = `${P}-sbA`;
let d: Daemon | undefined;
let client: KniClient | undefined;
const fillers: string[] = [];
const scratch = mkdtempSync(path.join(os.tmpdir(), `${P}-`));

test.after.always(async () => {
  client?.close();
  await cleanupDaemon(d, opts, [A, `${P}-sbB`, ...fillers]);
  for (const n of ['a', 'b', 'host']) removeNetns(`${P}-${n}`);
  for (const n of fillers) removeNetns(n);
  rmSync(scratch, { recursive: true, force: true });
});

interface Refusal {
  rpc: string;
  what: string;
  req: object;
  /** The field a refusal must name, or null where none fits (a pool running dry). */
  field: string | null;
  code: grpc.status;
}

test.serial('every KNI refusal names a field of the KNI request the caller sent, and changes nothing', async (t) => {
  const a = makeNetns(`${P}-a`);
  const b = makeNetns(`${P}-b`);
  removeNetns(`${P}-host`);
  execFileSync('ip', ['netns', 'attach', `${P}-host`, String(process.pid)]); // the host's netns, bind-mounted
  const hostBind = `/run/netns/${P}-host`;
  const regular = path.join(scratch, 'file');
  writeFileSync(regular, '');
  const proc1 = path.join(scratch, 'proc1');
  symlinkSync('/proc/1/ns/net', proc1);
  const toHostBind = path.join(scratch, 'host-bind');
  symlinkSync(hostBind, toHostBind);
  d = await startDaemon(opts);
  client = kniClient(d.socket);
  const netnsDir = path.join(d.dir, 'netns');
  mkdirSync(netnsDir, { recursive: true });
  writeFileSync(path.join(netnsDir, 'knit-default-squat'), ''); // in knit's netns dir, not pinned by knit
  writeFileSync(path.join(netnsDir, 'afile'), '');
  await kniCall(client, 'AttachInterface', { id: A, name: 'pa', namespace: 'default', isolation: { path: a }, port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: 18431 }] });
  const pod = (over: object) => ({ id: `${P}-sbB`, name: 'pb', namespace: 'default', isolation: { path: b }, ...over });
  const bad = InvalidArgument;
  const attach: Refusal[] = [
    bad('no netns at all', pod({ isolation: null }), 'isolation.path'),
    bad('a relative isolation.path', pod({ isolation: { path: 'run/netns/x' } }), 'isolation.path'),
    bad('/proc/1/ns/net', pod({ isolation: { path: '/proc/1/ns/net' } }), 'isolation.path'),
    bad('/proc/self/ns/net in extradata', pod({ isolation: null, extradata: { netns: '/proc/self/ns/net' } }), 'extradata["netns"]'),
    bad('a missing netns', pod({ isolation: { path: `/run/netns/${P}-none` } }), 'isolation.path'),
    bad('a regular file', pod({ isolation: { path: regular } }), 'isolation.path'),
    bad("the host's netns, bind-mounted", pod({ isolation: { path: hostBind } }), 'isolation.path'),
    bad("the host's bind mount, in extradata", pod({ isolation: null, extradata: { netns: hostBind } }), 'extradata["netns"]'),
    bad('a symlink to /proc/1/ns/net', pod({ isolation: { path: proc1 } }), 'isolation.path'),
    bad("a symlink to the host's bind mount", pod({ isolation: { path: toHostBind } }), 'isolation.path'),
    bad('no id', pod({ id: '' }), 'id'),
    bad("an id with '/'", pod({ id: 'a/b' }), 'id'),
    bad('a name with a newline', pod({ name: 'a\nb' }), 'name'),
    bad('a namespace of 300 characters', pod({ namespace: 'n'.repeat(300) }), 'namespace'),
    bad('an unknown runtime', pod({ extradata: { runtime: 'lxc' } }), 'extradata["runtime"]'),
    bad('a DNS server that is no IP', pod({ dns_config: { servers: ['x'], searches: [], options: [] } }), 'dns_config.servers[0]'),
    bad('an empty search domain', pod({ dns_config: { servers: [], searches: [''], options: [] } }), 'dns_config.searches[0]'),
    bad('33 DNS options', pod({ dns_config: { servers: [], searches: [], options: Array(33).fill('ndots:1') } }), 'dns_config.options'),
    bad('a host port out of range', pod({ port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: 70000 }] }), 'port_mappings[0].host_port'),
    bad('1025 port mappings', pod({ port_mappings: Array.from({ length: 1025 }, (_, i) => ({ protocol: 'TCP', container_port: i + 1 })) }), 'port_mappings'),
    bad('1025 labels', pod({ labels: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [`l${i}`, 'v'])) }), 'labels'),
    bad('a bandwidth annotation that is no quantity', pod({ annotations: { 'kubernetes.io/ingress-bandwidth': 'fast' } }), 'annotations["kubernetes.io/ingress-bandwidth"]'),
    { rpc: 'AttachInterface', what: "pod a's netns under another id", req: pod({ isolation: { path: a } }), field: 'isolation.path', code: grpc.status.FAILED_PRECONDITION },
    { rpc: 'AttachInterface', what: 'pod a again in another netns', req: { id: A, name: 'pa', namespace: 'default', isolation: { path: b } }, field: 'id', code: grpc.status.FAILED_PRECONDITION },
    { rpc: 'AttachInterface', what: "pod a's host port", req: pod({ port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: 18431 }] }), field: 'port_mappings[0]', code: grpc.status.ALREADY_EXISTS },
  ].map((r) => ({ ...r, rpc: 'AttachInterface' }));
  const detach: Refusal[] = [
    bad('no id and no name', {}, 'id'),
    bad("an id with '/'", { id: 'a/b' }, 'id'),
    bad('/proc/1/ns/net', { id: A, isolation: { path: '/proc/1/ns/net' } }, 'isolation.path'),
    bad('a relative extradata netns', { id: A, extradata: { netns: 'x' } }, 'extradata["netns"]'),
    bad("another pod's netns", { id: A, isolation: { path: b } }, 'isolation.path'),
    bad("the host's netns, bind-mounted", { id: A, isolation: { path: hostBind } }, 'isolation.path'),
    bad("a symlink to the host's bind mount, in extradata", { id: A, extradata: { netns: toHostBind } }, 'extradata["netns"]'),
    bad("another pod's netns, in extradata", { id: A, extradata: { netns: b } }, 'extradata["netns"]'),
  ].map((r) => ({ ...r, rpc: 'DetachInterface' }));
  const others: Refusal[] = [
    { ...bad('no id and no name', {}, 'id'), rpc: 'QueryPodNetwork' },
    { ...bad("an id with '/'", { id: 'a/b' }, 'id'), rpc: 'QueryPodNetwork' },
    { ...bad('a relative prefix', { name: 'c', namespace: 'default', netns_path_prefix: 'netns' }, 'netns_path_prefix'), rpc: 'CreateNetwork' },
    { ...bad("a prefix outside knit's netns dir", { name: 'c', namespace: 'default', netns_path_prefix: '/etc' }, 'netns_path_prefix'), rpc: 'CreateNetwork' },
    { ...bad('a prefix that is a file', { name: 'c', namespace: 'default', netns_path_prefix: path.join(netnsDir, 'afile') }, 'netns_path_prefix'), rpc: 'CreateNetwork' },
    { ...bad("a name with '..'", { name: '../x', namespace: 'default' }, 'name'), rpc: 'CreateNetwork' },
    { ...bad('a namespace with a space', { name: 'c', namespace: 'a b' }, 'namespace'), rpc: 'CreateNetwork' },
    { ...bad("a uid with '/'", { uid: 'a/b' }, 'uid'), rpc: 'CreateNetwork' },
    { ...bad('nothing to name it by', {}, 'id'), rpc: 'DeleteNetwork' },
    { ...bad("an id with '/'", { id: 'a/b' }, 'id'), rpc: 'DeleteNetwork' },
    { ...bad('a relative netns_path', { id: A, netns_path: 'run/netns/x' }, 'netns_path'), rpc: 'DeleteNetwork' },
    { ...bad("the host's netns_path", { id: A, netns_path: '/proc/1/ns/net' }, 'netns_path'), rpc: 'DeleteNetwork' },
    { ...bad('a relative extradata netns', { extradata: { netns: 'x' } }, 'extradata["netns"]'), rpc: 'DeleteNetwork' },
    { ...bad("a name with '/'", { name: 'a/b', namespace: 'default' }, 'name'), rpc: 'DeleteNetwork' },
    { rpc: 'DeleteNetwork', what: 'a netns knit did not pin', req: { id: A, netns_path: b }, field: 'netns_path', code: grpc.status.FAILED_PRECONDITION },
    { rpc: 'DeleteNetwork', what: "a file in knit's netns dir knit did not pin, by name", req: { name: 'squat', namespace: 'default' }, field: 'name', code: grpc.status.FAILED_PRECONDITION },
  ];
  // The pre-v0.0.7 method names take the same messages and the same path.
  const all = [...attach, ...attach.map((r) => ({ ...r, rpc: 'AttachNetwork' })), ...detach, ...detach.map((r) => ({ ...r, rpc: 'DetachNetwork' })), ...others];

  const watched = [undefined, `${P}-a`, `${P}-b`];
  const before = await knitState(d, watched);
  t.deepEqual(before.records, [`${A} ATTACHED`]);
  await walk(t, all, watched, before);

  // A body that is not the message it claims: `(request)`, in every KNI method.
  for (const rpc of Object.keys(requestOf)) {
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      client!.makeUnaryRequest(`/kni.KNI/${rpc}`, (x: Buffer) => x, (x: Buffer) => x, Buffer.from([0xff, 0xff]), (e) => resolve(e)),
    );
    t.is(err?.code, grpc.status.INVALID_ARGUMENT, rpc);
    t.deepEqual(err?.metadata.get('knit-field'), ['(request)'], rpc);
  }
  t.deepEqual(await knitState(d, watched), before);

  // The pool run dry: no field is at fault, and the message names none of knit.v1's.
  let filled = 0;
  for (; filled < 8; filled++) {
    const ns = makeNetns(`${P}-f${filled}`);
    fillers.push(`${P}-f${filled}`);
    const done = await kniCall(client, 'AttachInterface', { id: `${P}-f${filled}`, name: `f${filled}`, namespace: 'default', isolation: { path: ns } }).then(() => true, () => false);
    if (!done) break;
  }
  t.true(filled < 8, 'the /29 ran dry');
  const dry = await knitState(d, watched);
  await walk(t, [{ rpc: 'AttachInterface', what: 'the pool is empty', req: pod({}), field: null, code: grpc.status.RESOURCE_EXHAUSTED }], watched, dry);
});

async function walk(t: ExecutionContext, all: Refusal[], watched: (string | undefined)[], before: Awaited<ReturnType<typeof knitState>>) {
  for (const r of all) {
    const label = `${r.rpc}, ${r.what}`;
    const err = (await t.throwsAsync(kniCall(client!, r.rpc, r.req), undefined, label)) as unknown as grpc.ServiceError;
    if (!err) continue;
    t.is(err.code, r.code, `${label}: ${grpc.status[err.code]} ${err.details}`);
    const field: string | null = err.metadata.get('knit-field')[0]?.toString() ?? null;
    t.is(String(field), String(r.field), `${label}: ${err.details}`);
    if (field) {
      const paths = fieldPaths(kniDefs, 'kni', requestOf[r.rpc]);
      t.true(paths.includes(normalized(field)), `${label}: ${field} is not a field of kni.${requestOf[r.rpc]}`);
      t.true(err.details.startsWith(`${field}: `), `${label}: ${err.details}`);
    }
    const own = leafNames(fieldPaths(kniDefs, 'kni', requestOf[r.rpc]));
    const knitOnly = [...knitNames].filter((n) => n.includes('_') && !own.has(n));
    const named = knitOnly.filter((n) => new RegExp(`\\b${n}\\b`).test(err.details));
    t.deepEqual(named, [], `${label}: names knit.v1's ${named.join(', ')}: ${err.details}`);
    t.deepEqual(await knitState(d!, watched), before, `${label}: links, addresses, routes, records and pool as they were`);
  }
}

function InvalidArgument(what: string, req: object, field: string) {
  return { rpc: '', what, req, field, code: grpc.status.INVALID_ARGUMENT };
}
