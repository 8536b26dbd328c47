// Which attach is claiming which device right now, and what a strategy's prepare() may use.
// Claims never wait (a wait could deadlock two requests naming two devices in opposite
// orders): a device another attach is claiming right now is refused, as it would be a moment
// later by that attach's record.
import type { Op, ResultsOf } from '../base/ops.js';
import type { PrepareContext } from '../base/strategy.js';
import type { SandboxRecord } from './record.js';

export interface PrepareEnv {
  runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>>;
  sysfsRoot: string;
  danDir?: string;
  records(): Iterable<SandboxRecord>;
  pathExists?(path: string): boolean;
}

export class DeviceClaims {
  /** Device key (PCI address) -> the sandbox whose attach is claiming it. */
  private readonly claims = new Map<string, string>();

  /** The context for one attach (or, readOnly, one plan preview); release() drops its claims. */
  holds(sandboxId: string, env: PrepareEnv, readOnly = false): { ctx: PrepareContext; release(): void } {
    const held = new Set<string>();
    const ctx: PrepareContext = {
      runOps: env.runOps,
      sysfsRoot: env.sysfsRoot,
      ...(env.danDir !== undefined && { danDir: env.danDir }),
      ...(env.pathExists && { pathExists: env.pathExists }),
      holderOf: (pciAddress) => {
        for (const r of env.records()) {
          if (r.sandboxId !== sandboxId && r.result.interfaces.some((i) => i.pciId === pciAddress)) return r.sandboxId;
        }
        return undefined;
      },
      lock: (key) => {
        if (held.has(key)) return sandboxId;
        const other = this.claims.get(key);
        if (other !== undefined && !readOnly) return other;
        held.add(key);
        if (!readOnly) this.claims.set(key, sandboxId);
        return undefined;
      },
    };
    const release = () => {
      for (const key of held) if (!readOnly && this.claims.get(key) === sandboxId) this.claims.delete(key);
    };
    return { ctx, release };
  }
}
