// A netlink handle bound to one network namespace: the typed face of the addon's Handle.
//
// The native side opens a NETLINK_ROUTE socket on one of its netns worker threads inside the
// netns (no setns on the JS thread or on pool threads; native/src/ns_thread.h), so every later
// request runs there from whichever thread sends it. `run` picks the thread:
//
//  - On the JS thread (runSync) when every op of the batch is one the kernel answers in
//    microseconds: reads (link.get/list, addr/route/neigh/qdisc/filter lists, sysctl.get) and
//    addr, route, neigh and filter changes. Measured with bench/net-handle-paths.mjs on the
//    2-core dev VM: link.get ~120 µs, addr.list ~100 µs, route.add ~80 µs, neigh.add ~120 µs,
//    filter.add ~300 µs (medians, with other test suites running). A pool hop costs more
//    than that and buys nothing.
//  - On a libuv pool thread (native run) otherwise, because these block in the kernel:
//    deleting a veth, bridge or tap waits for an RCU grace period (20-40 ms each; one
//    link.delGroup deletes many for the price of one), moving a link to another netns
//    (~20 ms), creating a veth (4-10 ms, more with its peer in another netns), tun.add
//    (4 ms; 15 ms with 4 queues), qdisc add/del (~2 ms: qdisc grafting waits
//    for in-flight packets), sysctl.set (a netns hop plus whatever the write triggers), link.set
//    (enslaving, up/down and renames take the RTNL lock and can wait on it), vf.set (PF
//    drivers talk to firmware).
// The daemon's event loop is never blocked for a kernel wait. While a pool batch is running
// on a handle, quick batches for that handle go to the pool too: the socket serves one batch
// at a time, and waiting for it on the JS thread would block the loop after all.
//
// A single batch in a pod's netns (the daemon's case) goes through runInNetns instead: the
// netns open, the socket, the batch and both closes in one pool hop. Measured with a 4-op quick
// batch (addr.add, route.add, route.del, addr.del) on the loaded 2-core dev VM: open + runSync +
// close costs 130-220 µs, all of it on the JS thread; runInNetns 170-270 µs end to end (CPU
// ~170 µs) of which 30-70 µs on the JS thread (checking the ops). Quick batches go there too:
// the pool hop costs some 50 µs of latency, but the event loop keeps serving other calls.
import type { LinkInfo, Op, OpResult, ResultsOf } from '../base/ops.js';
import { native } from './native.js';
import { toKernelError } from './errors.js';

/** The addon's Handle class as the addon exports it (see native/src/handle.h). */
interface NativeHandle {
  run(ops: readonly Op[]): Promise<OpResult[]>;
  runSync(ops: readonly Op[]): OpResult[];
  encode(op: Op): Buffer;
  close(): void;
  readonly netns?: string;
  readonly closed: boolean;
}
interface NativeHandleClass {
  new (netnsPath?: string): NativeHandle;
  decodeLink(message: Buffer): LinkInfo;
  runIn(netnsPath: string, ops: readonly Op[]): Promise<OpResult[]>;
}
const NativeHandle = native.Handle as NativeHandleClass;

/** Ops the kernel answers without waiting on anything: fine to run on the JS thread. */
const QUICK_OPS: ReadonlySet<Op['op']> = new Set<Op['op']>([
  'link.get', 'link.list', 'addr.list', 'route.list', 'neigh.list', 'fdb.list', 'qdisc.list', 'filter.list', 'sysctl.get',
  'addr.add', 'addr.del', 'route.add', 'route.replace', 'route.del', 'neigh.add', 'neigh.replace', 'neigh.del', 'fdb.replace', 'fdb.del', 'filter.add', 'filter.del',
]);

/** True when run() would execute this batch on the calling thread. */
function isQuickBatch(ops: readonly Op[]): boolean {
  return ops.every((o) => QUICK_OPS.has(o?.op));
}

export class NetHandle {
  /** Pool batches started and not yet finished. */
  private onPool = 0;

  private constructor(
    private readonly h: NativeHandle,
    /** The netns path this handle works in; undefined = the daemon's own netns. */
    readonly netns: string | undefined,
  ) {}

  /** Opens a handle in the netns at netnsPath (absent: the daemon's own). Throws KernelError
   * (ENOENT: no such path; EINVAL: not a network namespace). */
  static open(netnsPath?: string): NetHandle {
    try {
      return new NetHandle(new NativeHandle(netnsPath), netnsPath);
    } catch (err) {
      throw toKernelError(err, undefined, netnsPath);
    }
  }

  /** Parses one RTM_NEWLINK message (for tests of reply parsing). */
  static decodeLink(message: Buffer): LinkInfo {
    return NativeHandle.decodeLink(message);
  }

  get closed(): boolean {
    return this.h.closed;
  }

  /** Batches started on the pool and not yet finished: a caller with several handles to the
   * same netns picks an idle one (the socket serves one batch at a time). */
  get inFlight(): number {
    return this.onPool;
  }

  /** Runs ops in order, stopping at the first failure: rejects with a KernelError whose
   * `index` names the failing op and `completed` holds the results before it. Bad fields
   * reject with a TypeError/RangeError naming the field before anything is sent. Picks the
   * JS thread or a pool thread as the header comment says. */
  async run<const T extends readonly Op[]>(ops: T): Promise<ResultsOf<T>> {
    if (this.onPool === 0 && Array.isArray(ops) && isQuickBatch(ops)) return this.runSync(ops);
    return this.runOnPool(ops);
  }

  /** Runs ops on a libuv pool thread, whatever they are. */
  async runOnPool<const T extends readonly Op[]>(ops: T): Promise<ResultsOf<T>> {
    this.onPool++;
    try {
      return (await this.h.run(ops)) as ResultsOf<T>; // the addon answers each op as OpResults says
    } catch (err) {
      throw toKernelError(err, ops, this.netns);
    } finally {
      this.onPool--;
    }
  }

  /** Runs ops on the calling thread. Only for quick ops (see isQuickBatch): a veth delete
   * here would stall the event loop for an RCU grace period. */
  runSync<const T extends readonly Op[]>(ops: T): ResultsOf<T> {
    try {
      return this.h.runSync(ops) as ResultsOf<T>;
    } catch (err) {
      throw toKernelError(err, ops, this.netns);
    }
  }

  /** The exact netlink request bytes op would send (seq 0, pid 0), all requests of the op back
   * to back. Link names are resolved to ifindexes by a lookup, as a run would. */
  encode(op: Op): Buffer {
    try {
      return this.h.encode(op);
    } catch (err) {
      throw toKernelError(err, op, this.netns);
    }
  }

  /** Closes the socket (also done when the handle is garbage-collected). Idempotent. */
  close(): void {
    this.h.close();
  }
}

/** Runs one batch in the netns at netnsPath with a socket of its own, as NetHandle.open + run +
 * close would, and answers the same (KernelError with index and completed; ENOENT or EINVAL
 * for a bad netns path). Opening the netns and the socket, the batch and closing both happen
 * in one libuv pool hop: the JS thread only checks the ops' fields. Nothing of the netns stays
 * open once the promise settles. */
export async function runInNetns<const T extends readonly Op[]>(netnsPath: string, ops: T): Promise<ResultsOf<T>> {
  try {
    return (await NativeHandle.runIn(netnsPath, ops)) as ResultsOf<T>;
  } catch (err) {
    // An open failure carries no index, so no op is blamed: the same error NetHandle.open throws.
    throw toKernelError(err, ops, netnsPath);
  }
}
