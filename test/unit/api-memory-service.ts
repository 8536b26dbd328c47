// An in-memory SandboxService for testing the API layer (decode, validate, map, encode) with
// no kernel underneath. It is not a stand-in for hardware: core is simply out of scope here.
// It behaves as core promises: idempotent attach/detach, NOT_FOUND for unknown sandboxes,
// RESOURCE_EXHAUSTED when its small pool runs out.
import { KnitError, CniCode } from '../../src/base/errors.js';
import type { Handoff } from '../../src/base/handoff.js';
import type {
  AttachRequest,
  AttachResult,
  Extension,
  InterfaceRequest,
  SandboxRecordView,
  SandboxService,
  WatchEvent,
} from '../../src/base/types.js';

export class MemorySandboxService implements SandboxService {
  readonly records = new Map<string, SandboxRecordView>();
  readonly extensions = new Map<string, Extension>();
  readonly listeners = new Set<(e: WatchEvent) => void>();
  readonly gcCalls: { sandboxId: string; interface?: string }[][] = [];
  readonly detachCalls: { sandboxId: string; netnsPath?: string }[] = [];
  /** Throw this from the next call of the named method (to test error mapping). */
  failNext: Partial<Record<keyof SandboxService, unknown>> = {};
  private nextHost = 2;

  constructor(private readonly poolSize = 3) {}

  private maybeFail(method: keyof SandboxService): void {
    if (method in this.failNext) {
      const err = this.failNext[method];
      delete this.failNext[method];
      throw err;
    }
  }

  private emit(e: WatchEvent): void {
    for (const l of this.listeners) l(e);
  }

  async attach(req: AttachRequest): Promise<AttachResult> {
    this.maybeFail('attach');
    const existing = this.records.get(req.sandboxId);
    if (existing?.result) {
      if (existing.request.netnsPath !== req.netnsPath) {
        throw new KnitError('FAILED_PRECONDITION', `sandbox ${req.sandboxId} is attached to ${existing.request.netnsPath}`, {
          field: 'netns_path',
        });
      }
      return existing.result;
    }
    if (this.nextHost - 2 >= this.poolSize) {
      throw new KnitError('RESOURCE_EXHAUSTED', 'network default: pool 10.88.0.0/24 has no free address', {
        cniCode: CniCode.tryAgainLater,
      });
    }
    const result: AttachResult = {
      sandboxId: req.sandboxId,
      netnsPath: req.netnsPath,
      runtime: req.runtime,
      interfaces: [],
      ips: [],
      routes: [],
      ...(req.dns ? { dns: req.dns } : {}),
    };
    for (const iface of req.interfaces) {
      const host = this.nextHost++;
      result.interfaces.push({ name: `knit${host}h`, kind: 'veth', mac: `02:00:00:00:01:${host.toString(16).padStart(2, '0')}` });
      const index = result.interfaces.length;
      result.interfaces.push({
        name: iface.name,
        kind: 'veth',
        sandbox: req.netnsPath,
        mac: iface.mac ?? `02:00:00:00:00:${host.toString(16).padStart(2, '0')}`,
        mtu: iface.mtu ?? 1500,
        hostName: `knit${host}h`,
        // Not a real hand-off: the API tests only check that any JSON object crosses as a Struct.
        ...(req.runtime === 'kata' ? { handoff: { tap: 'tap0_kata', queues: 1 } as unknown as Handoff } : {}),
      });
      const addresses = iface.ips?.length ? iface.ips : [`10.88.0.${host}/24`, `fd00:88::${host}/64`];
      for (const address of addresses) {
        const family = address.includes(':') ? 6 : 4;
        result.ips.push({ address, family, interface: index, gateway: family === 4 ? '10.88.0.1' : 'fd00:88::1' });
      }
    }
    result.routes.push({ dst: '0.0.0.0/0', gw: '10.88.0.1' }, { dst: '::/0', gw: 'fd00:88::1' });
    this.records.set(req.sandboxId, { request: req, result, state: 'attached', createdAt: new Date().toISOString() });
    this.emit({ type: 'attach', sandboxId: req.sandboxId, result });
    return result;
  }

  async detach(sandboxId: string, netnsPath?: string): Promise<void> {
    this.maybeFail('detach');
    this.detachCalls.push({ sandboxId, ...(netnsPath ? { netnsPath } : {}) });
    if (this.records.delete(sandboxId)) this.emit({ type: 'detach', sandboxId });
  }

  private get(sandboxId: string): SandboxRecordView {
    const r = this.records.get(sandboxId);
    if (!r) throw new KnitError('NOT_FOUND', `sandbox ${sandboxId} is not attached`, { cniCode: CniCode.containerUnknown });
    return r;
  }

  async check(sandboxId: string) {
    this.maybeFail('check');
    this.get(sandboxId);
    return { ok: true, differences: [] };
  }

  async query(sandboxId: string) {
    this.maybeFail('query');
    return { ...this.get(sandboxId), live: { ok: true, differences: [] } };
  }

  lookup(sandboxId: string) {
    this.maybeFail('lookup');
    return this.records.get(sandboxId);
  }

  async list() {
    this.maybeFail('list');
    return [...this.records.values()];
  }

  async nodeStatus() {
    this.maybeFail('nodeStatus');
    const used = this.nextHost - 2;
    return {
      ready: true,
      reason: '',
      message: 'ok',
      schedulable: used < this.poolSize,
      networks: [
        {
          name: 'default',
          mode: 'bridge' as const,
          ready: true,
          pools: [
            { family: 4 as const, subnet: '10.88.0.0/24', size: 254, used, free: 254 - used },
            // 2^64 addresses: more than a double holds exactly; the API must not mangle it.
            { family: 6 as const, subnet: 'fd00:88::/64', size: 2 ** 64, used, free: 2 ** 64 - used },
          ],
        },
      ],
      sandboxes: this.records.size,
    };
  }

  async garbageCollect(valid: { sandboxId: string; interface?: string }[]) {
    this.maybeFail('garbageCollect');
    this.gcCalls.push(valid);
    const keep = new Set(valid.map((v) => v.sandboxId));
    const removed = [...this.records.keys()].filter((id) => !keep.has(id));
    for (const id of removed) this.records.delete(id);
    return { removed, errors: [] };
  }

  async addInterface(sandboxId: string, iface: InterfaceRequest): Promise<AttachResult> {
    this.maybeFail('addInterface');
    const r = this.get(sandboxId);
    if (!r.request.interfaces.some((i) => i.name === iface.name)) {
      r.request = { ...r.request, interfaces: [...r.request.interfaces, iface] };
      r.result!.interfaces.push({ name: iface.name, kind: 'veth', sandbox: r.request.netnsPath });
    }
    return r.result!;
  }

  async removeInterface(sandboxId: string, name: string): Promise<void> {
    this.maybeFail('removeInterface');
    const r = this.records.get(sandboxId);
    if (!r) return;
    r.request = { ...r.request, interfaces: r.request.interfaces.filter((i) => i.name !== name) };
    r.result!.interfaces = r.result!.interfaces.filter((i) => i.name !== name);
  }

  async planAddInterface(sandboxId: string, iface: InterfaceRequest) {
    this.maybeFail('planAddInterface');
    const r = this.get(sandboxId);
    return { steps: [{ description: `create veth ${iface.name} in ${r.request.netnsPath}`, op: { op: 'link.add', kind: 'veth' } }] };
  }

  async plan(req: AttachRequest) {
    this.maybeFail('plan');
    return {
      steps: req.interfaces.map((i) => ({
        description: `create veth ${i.name} in ${req.netnsPath}`,
        op: { op: 'link.add', kind: 'veth', name: 'knit0h', peer: { name: i.name, netns: req.netnsPath } },
        undo: { op: 'link.del', name: 'knit0h', ignoreMissing: true },
      })),
    };
  }

  watch(listener: (e: WatchEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async registerExtension(ext: Extension) {
    this.maybeFail('registerExtension');
    this.extensions.set(ext.name, ext);
  }

  async unregisterExtension(name: string) {
    if (!this.extensions.delete(name)) throw new KnitError('NOT_FOUND', `extension ${name} is not registered`);
  }

  async listExtensions() {
    return [...this.extensions.values()];
  }
}

/** A createNetns/deleteNetns pair that only records paths (KNI CreateNetwork without a kernel). */
export function memoryNetns() {
  const created = new Set<string>();
  return {
    created,
    createNetns: async (p: string) => {
      if (created.has(p)) throw new KnitError('ALREADY_EXISTS', `netns ${p} exists`);
      created.add(p);
    },
    deleteNetns: async (idOrPath: string) => {
      created.delete(idOrPath);
    },
  };
}
