// Executes a plan's actions in a netns: what core's executor drives (core's ActionRunner). It
// lives with the composition root because it is where net (rtnetlink), devices (sysfs) and
// store (files) meet; core sees only the interface.
//
// The host sockets live as long as the runner; a sandbox netns gets a socket for one batch
// only (runInNetns: open, run and close in one pool hop), because an open netlink socket pins
// its namespace, and a cached one would keep a deleted pod's netns alive (and answer for it if
// a new pod were pinned at the same path).
import type { HostAction, Op, OpResult, ResultsOf } from '../base/ops.js';
import { NetHandle, runInNetns } from '../net/handle.js';
import { identifyNetns, sameNetns, type NetnsId } from '../net/netns.js';
import { isPolicyAction, ownHostPortTables, runHostAction, type PolicyAction } from './host-actions.js';
import type { CniHooks } from '../cni-exec/action.js';

/** Host sockets kept open. A socket serves one batch at a time, and a batch can hold it for an
 * RCU grace period (20-40 ms: the reaper's bulk delete, a veth create under load), so a host
 * batch takes an idle socket rather than queue behind another. One per libuv pool thread; what
 * needs RTNL the kernel still serialises. */
const HOST_SOCKETS = 4;

export class DaemonActionRunner {
  private readonly hosts: NetHandle[] = [];
  /** The NetworkPolicy controller, when the config turns it on (src/daemon/policy.ts). Without
   * one, a release finds nothing to do (a start-up repair of a record made while policy was
   * on) and an admit is refused. */
  policy?: (action: PolicyAction) => Promise<void>;

  /** cni: where CNI plugins' stderr goes (knit's log, with the sandbox id), and the crash
   * tests' failpoint inside a chain. */
  constructor(private readonly cni: CniHooks = {}) {}

  private hostHandle(): NetHandle {
    let least: NetHandle | undefined;
    for (const h of this.hosts) if (!least || h.inFlight < least.inFlight) least = h;
    if (least && (least.inFlight === 0 || this.hosts.length >= HOST_SOCKETS)) return least;
    const opened = NetHandle.open();
    this.hosts.push(opened);
    return opened;
  }

  async runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>> {
    if (netns === undefined) return this.hostHandle().run(ops);
    return runInNetns(netns, ops);
  }

  runHostAction(netns: string | undefined, action: HostAction): Promise<OpResult | void> {
    if (isPolicyAction(action)) {
      if (this.policy) return this.policy(action);
      if (action.op === 'policy.release') return Promise.resolve();
      return Promise.reject(new Error(`${action.op} of ${action.namespace}/${action.name}: NetworkPolicy is not on in this knit's config`));
    }
    return runHostAction(netns, action, (ns, ops) => this.runOps(ns, ops), this.cni);
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
    for (const h of this.hosts.splice(0)) h.close();
  }
}
