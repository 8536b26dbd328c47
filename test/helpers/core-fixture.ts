// A SandboxManager over fakes for core's unit tests (test/unit/manager.test.ts, recovery.test.ts):
// every port faked except the pure ones, the real IPAM and the real runc strategy (plans are
// data); a fake runner that records what it is asked and fails where told; an in-memory record
// store that keeps every write; extensions that log their phases. One shared event log gives
// the order of what core did across them.
import { SandboxManager } from '../../src/core/manager.js';
import type { ExtensionsPort, NetnsPort, RecordStorePort } from '../../src/core/ports.js';
import { Ipam } from '../../src/ipam/index.js';
import { runcStrategy } from '../../runtimes/runc/index.js';
import { tolerant, type Step, type StepAction } from '../../src/base/plan.js';
import { KnitError } from '../../src/base/errors.js';
import type { NetworkSpec } from '../../src/base/strategy.js';
import type { SandboxRecord } from '../../src/core/record.js';
import type { AttachRequest, InterfaceRequest } from '../../src/base/types.js';
import { FakeRunner } from './fake-runner.js';

export const NETNS = '/run/netns/tm-pod';

export const NETWORKS: NetworkSpec[] = [
  {
    name: 'pods', mode: 'routed', mtu: 1500, hairpin: false, routes: [{ dst: '10.188.128.0/17' }],
    ipv4: { subnet: '10.188.1.0/24', gateway: '10.188.1.1' }, ipv6: { subnet: 'fd00:188:1::/64', gateway: 'fd00:188:1::1' },
  },
  {
    name: 'storage', mode: 'bridge', bridge: 'tmbr0', mtu: 1450, hairpin: true, routes: [],
    ipv4: { subnet: '10.188.2.0/24', gateway: '10.188.2.1' },
  },
];

export class MemoryRecords implements RecordStorePort<SandboxRecord> {
  readonly docs = new Map<string, SandboxRecord>();
  /** Every record written, in order (retire names are random: expected inverses come from here). */
  readonly written: SandboxRecord[] = [];
  /** A write this answers true for fails, as a full disk would. */
  failPut?: (doc: SandboxRecord) => boolean;
  constructor(private readonly events: string[]) {}
  get(id: string) { return this.docs.get(id); }
  values() { return this.docs.values(); }
  async put(id: string, doc: SandboxRecord) {
    this.events.push(`store.put ${doc.state}`);
    if (this.failPut?.(doc)) throw new Error('no space left on device');
    this.docs.set(id, structuredClone(doc));
    this.written.push(structuredClone(doc));
  }
  async remove(id: string) {
    this.events.push('store.remove');
    this.docs.delete(id);
  }
}

export class FakeExtensions implements ExtensionsPort {
  failPhase?: string;
  constructor(private readonly events: string[]) {}
  list() { return []; }
  async register() {}
  async unregister() {}
  async notify(phase: string) {
    this.events.push(`extensions.${phase}`);
    if (phase === this.failPhase) throw new KnitError('UNAVAILABLE', `required extension failed at ${phase}`);
  }
  missingRequired() { return []; }
}

const inodeOf = (path: string) => [...path].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 17);
/** Paths the fixture's NetnsPort counts as the host's namespace (bind mounts of it, say). */
export const HOST_PATHS = new Set(['/run/netns/tm-host-bind']);

/** netns: a NetnsPort of the test's own (one that refuses, say); whenReaped: the reaper's. */
export function fixture(netns?: NetnsPort, whenReaped?: () => Promise<void>) {
  const events: string[] = [];
  const runner = new FakeRunner(events);
  const records = new MemoryRecords(events);
  const extensions = new FakeExtensions(events);
  const ipam = new Ipam(NETWORKS);
  let kicks = 0;
  const manager = new SandboxManager({
    networks: () => new Map(NETWORKS.map((n) => [n.name, n])),
    defaultNetwork: () => 'pods',
    unreadyNetworks: () => new Map(),
    records,
    ipam,
    runner,
    // One netns per path; the inode stands for the namespace.
    netns: netns ?? {
      identify: (path) => ({ path, dev: 4, ino: inodeOf(path) }),
      // A path the runner says is gone (deleted behind knit's back) is a gone namespace.
      goneChecker: () => (id) => runner.gone.has(id.path),
      relation: (path, sandbox) => (runner.gone.has(path) ? 'none' : inodeOf(path) === sandbox.ino ? 'same' : HOST_PATHS.has(path) ? 'host' : 'other'),
    },
    strategies: { runc: runcStrategy },
    extensions,
    reaper: { kick: () => kicks++, whenReaped: whenReaped ?? (async () => undefined) },
  });
  const held = () => NETWORKS.reduce((n, net) => n + ipam.usage(net.name).reduce((m, p) => m + p.used, 0), 0);
  return { events, runner, records, extensions, ipam, manager, held, kicks: () => kicks };
}

export function request(over: Partial<AttachRequest> = {}, interfaces: InterfaceRequest[] = [{ name: 'eth0' }]): AttachRequest {
  return { sandboxId: 'sb-1', netnsPath: NETNS, runtime: 'runc', interfaces, portMappings: [], labels: {}, annotations: {}, ...over };
}

export const TWO_NETWORKS: InterfaceRequest[] = [{ name: 'eth0' }, { name: 'net1', network: 'storage' }];

/** What undoing steps [0, count) in retire mode must send: each step's retire actions (else
 * its undo), last step first, every one tolerant of a missing object. */
export function inversesOf(steps: Step[], count: number): StepAction[] {
  return steps
    .slice(0, count)
    .reverse()
    .flatMap((s) => s.retire ?? (s.undo ? [s.undo] : []))
    .map(tolerant);
}

/** Makes the runner fail step k of `steps` when it comes. Its action may repeat (each
 * interface brings up lo): the failure hits its own occurrence. */
export function failStep(runner: FakeRunner, steps: Step[], k: number): void {
  const failing = JSON.stringify(steps[k].do);
  let before = steps.slice(0, k).filter((s) => JSON.stringify(s.do) === failing).length;
  runner.failWhen = (a) => JSON.stringify(a) === failing && before-- === 0;
}

/** The steps a clean attach of `req` records (their do actions are the same every time). */
export async function plannedSteps(req: AttachRequest): Promise<Step[]> {
  const f = fixture();
  await f.manager.attach(req);
  return f.records.get(req.sandboxId)!.steps;
}

