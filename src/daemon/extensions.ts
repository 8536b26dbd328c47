// Registered extensions (the KEP's service-mesh hook): durable across restarts, called in
// order for their phase with the full result. A required extension's failure fails the attach.
import type { AttachRequest, AttachResult, Extension } from '../base/types.js';
import type { ExtensionsPort, RecordStorePort } from '../core/ports.js';
import { KnitError } from '../base/errors.js';

export type ExtensionCall = (ext: Extension, phase: Extension['phase'], result: AttachResult, req: AttachRequest) => Promise<void>;

/** What the daemon logs about a failed call: a non-required extension's failure is otherwise
 * invisible (the attach goes on), and so is any pre-detach one (detach never waits on it). */
export interface ExtensionFailure {
  sandboxId: string;
  extension: string;
  endpoint: string;
  phase: Extension['phase'];
  required: boolean;
  err: string;
}

export class ExtensionRegistry implements ExtensionsPort {
  constructor(
    private readonly store: RecordStorePort<Extension>,
    private readonly call: ExtensionCall,
    private readonly required: () => string[],
    private readonly onFailure: (f: ExtensionFailure) => void = () => undefined,
  ) {}

  list(): Extension[] {
    return [...this.store.values()].sort((a, b) => a.order - b.order || a.name.localeCompare(b.name));
  }

  async register(ext: Extension): Promise<void> {
    await this.store.put(ext.name, ext);
  }

  async unregister(name: string): Promise<void> {
    if (!this.store.get(name)) throw new KnitError('NOT_FOUND', `no extension named ${name} is registered`, { field: 'name' });
    await this.store.remove(name);
  }

  missingRequired(): string[] {
    return this.required().filter((name) => !this.store.get(name));
  }

  async notify(phase: Extension['phase'], result: AttachResult, req: AttachRequest): Promise<void> {
    for (const ext of this.list().filter((e) => e.phase === phase)) {
      try {
        await this.call(ext, phase, result, req);
      } catch (err) {
        const f = { sandboxId: req.sandboxId, extension: ext.name, endpoint: ext.endpoint, phase, required: ext.required, err: (err as Error).message };
        this.onFailure(f);
        if (ext.required) {
          throw new KnitError('FAILED_PRECONDITION', `required extension ${ext.name} (${ext.endpoint}) failed at ${phase}: ${(err as Error).message}`);
        }
      }
    }
  }
}
