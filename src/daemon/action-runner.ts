// Executes a plan's actions in a netns: what core's executor drives (core's ActionRunner). It
// lives with the composition root because it is where net (rtnetlink), devices (sysfs) and
// store (files) meet; core sees only the interface.
//
// The host handle lives as long as the runner; a sandbox netns gets a socket for one batch
// only (runInNetns: open, run and close in one pool hop), because an open netlink socket pins
// its namespace, and a cached one would keep a deleted pod's netns alive (and answer for it if
// a new pod were pinned at the same path).
import type { HostAction, Op, OpResult, ResultsOf } from '../base/ops.js';
import { NetHandle, runInNetns } from '../net/handle.js';
import { identifyNetns, sameNetns, type NetnsId } from '../net/netns.js';
import { ownHostPortTables, runHostAction } from './host-actions.js';
import type { CniHooks } from '../cni-exec/action.js';

export class DaemonActionRunner {
  private host?: NetHandle;

  /** cni: where CNI plugins' stderr goes (knit's log, with the sandbox id), and the crash
   * tests' failpoint inside a chain. */
  constructor(private readonly cni: CniHooks = {}) {}

  private hostHandle(): NetHandle {
    return (this.host ??= NetHandle.open());
  }

  async runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>> {
    if (netns === undefined) return this.hostHandle().run(ops);
    return runInNetns(netns, ops);
  }

  runHostAction(netns: string | undefined, action: HostAction): Promise<OpResult | void> {
    return runHostAction(netns, action, this.cni);
  }

  netnsUsable(netns: string, expect?: NetnsId): boolean {
    try {
      const id = identifyNetns(netns, { rejectHost: true });
      return !expect || sameNetns(id, expect);
    } catch {
      return false;
    }
  }

  hostPortTables(): Promise<string[]> {
    return ownHostPortTables();
  }

  close(): void {
    this.host?.close();
    this.host = undefined;
  }
}
