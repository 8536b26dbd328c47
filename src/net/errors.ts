// Kernel errors as sentences. The addon reports facts (errno, which op of a batch failed, the
// kernel's extended-ack text, what it was doing); this turns them into what a user reads:
//   EEXIST creating veth kn1a2b3c4d5e: a link with this name already exists in netns /run/netns/foo
import type { LinkRef, Op, OpResult } from '../base/ops.js';

/** The shape of an error thrown or rejected by the native Handle. */
export interface NativeOpError extends Error {
  code?: string;
  errno?: number;
  index?: number;
  extack?: string;
  context?: string;
  completed?: OpResult[];
}

export class KernelError extends Error {
  /** errno name, e.g. "EEXIST". */
  readonly code: string;
  readonly errno: number;
  /** The op that failed (undefined when opening the handle failed). */
  readonly op?: Op;
  /** Position of that op in its batch: ops before it took effect, it and later ones did not. */
  readonly index?: number;
  /** What was acted on, e.g. "veth kn1a2b3c4d5e". */
  readonly object?: string;
  /** The handle's netns path; undefined = the daemon's own. */
  readonly netns?: string;
  /** The kernel's own words (NLMSGERR_ATTR_MSG), when it gave any. */
  readonly extack?: string;
  /** What the addon was doing when it failed, e.g. "look up link eth9 (ops[1].link)". */
  readonly context?: string;
  /** Results of the ops before the failing one. */
  readonly completed: OpResult[];

  constructor(message: string, fields: Omit<KernelError, 'name' | 'message' | 'stack' | 'cause'>) {
    super(message);
    this.name = 'KernelError';
    this.code = fields.code;
    this.errno = fields.errno;
    this.op = fields.op;
    this.index = fields.index;
    this.object = fields.object;
    this.netns = fields.netns;
    this.extack = fields.extack;
    this.context = fields.context;
    this.completed = fields.completed;
  }
}

function ref(l: LinkRef | undefined): string {
  return l === undefined ? '?' : typeof l === 'number' ? `#${l}` : l;
}

/** "creating veth kn1a2b3c4d5e" and "veth kn1a2b3c4d5e": what an op does, and to what. */
function describeOp(op: Op): { doing: string; object: string } {
  switch (op.op) {
    case 'link.add': {
      const object = `${op.kind} ${op.name}`;
      return { doing: `creating ${object}`, object };
    }
    case 'link.set': {
      const what = Object.keys(op).filter((k) => k !== 'op' && k !== 'link');
      return { doing: `setting ${what.join(', ') || 'nothing'} on link ${ref(op.link)}`, object: `link ${ref(op.link)}` };
    }
    case 'link.del': return { doing: `deleting link ${ref(op.link)}`, object: `link ${ref(op.link)}` };
    case 'link.delGroup': return { doing: `deleting link group ${op.group}`, object: `link group ${op.group}` };
    case 'link.get': return { doing: `reading link ${ref(op.link)}`, object: `link ${ref(op.link)}` };
    case 'link.list': return { doing: 'listing links', object: 'links' };
    case 'link.evict': return { doing: 'moving aside links a detached sandbox left', object: 'leftover links' };
    case 'addr.add': return { doing: `adding address ${op.address} to ${ref(op.link)}`, object: `address ${op.address}` };
    case 'addr.del': return { doing: `removing address ${op.address} from ${ref(op.link)}`, object: `address ${op.address}` };
    case 'addr.list': return { doing: 'listing addresses', object: 'addresses' };
    case 'route.add':
    case 'route.replace':
    case 'route.del': {
      const verb = op.op === 'route.add' ? 'adding' : op.op === 'route.replace' ? 'replacing' : 'deleting';
      const via = `${op.gateway ? ` via ${op.gateway}` : ''}${op.link !== undefined ? ` dev ${ref(op.link)}` : ''}`;
      return { doing: `${verb} route ${op.dst}${via}${op.table ? ` table ${op.table}` : ''}`, object: `route ${op.dst}` };
    }
    case 'route.list': return { doing: 'listing routes', object: 'routes' };
    case 'neigh.add':
    case 'neigh.replace':
    case 'neigh.del': {
      const kind = op.proxy ? 'proxy neighbour' : 'neighbour';
      const verb = op.op === 'neigh.add' ? 'adding' : op.op === 'neigh.replace' ? 'replacing' : 'deleting';
      return { doing: `${verb} ${kind} ${op.address} on ${ref(op.link)}`, object: `${kind} ${op.address}` };
    }
    case 'neigh.list': return { doing: 'listing neighbours', object: 'neighbours' };
    case 'fdb.replace':
    case 'fdb.del': {
      const verb = op.op === 'fdb.replace' ? 'replacing' : 'deleting';
      return { doing: `${verb} fdb entry ${op.mac}${op.dst ? ` dst ${op.dst}` : ''} on ${ref(op.link)}`, object: `fdb entry ${op.mac}` };
    }
    case 'fdb.list': return { doing: 'listing fdb entries', object: 'fdb entries' };
    case 'qdisc.add': return { doing: `adding ${op.kind} qdisc to ${ref(op.link)}`, object: `${op.kind} qdisc on ${ref(op.link)}` };
    case 'qdisc.del': return { doing: `removing ${op.kind} qdisc from ${ref(op.link)}`, object: `${op.kind} qdisc on ${ref(op.link)}` };
    case 'qdisc.list': return { doing: 'listing qdiscs', object: 'qdiscs' };
    case 'filter.add':
      return { doing: `adding ${op.parent} redirect filter ${ref(op.link)} -> ${ref(op.redirectTo)}`, object: `${op.parent} filter on ${ref(op.link)}` };
    case 'filter.del': return { doing: `removing ${op.parent} filters from ${ref(op.link)}`, object: `${op.parent} filter on ${ref(op.link)}` };
    case 'filter.list': return { doing: `listing ${op.parent} filters of ${ref(op.link)}`, object: `filters on ${ref(op.link)}` };
    case 'vf.set': return { doing: `configuring VF ${op.vf} of ${ref(op.link)}`, object: `VF ${op.vf} of ${ref(op.link)}` };
    case 'sysctl.set': return { doing: `setting sysctl ${op.key}=${op.value}`, object: `sysctl ${op.key}` };
    case 'sysctl.get': return { doing: `reading sysctl ${op.key}`, object: `sysctl ${op.key}` };
    case 'tun.add': return { doing: `creating ${op.mode} ${op.name}`, object: `${op.mode} ${op.name}` };
    case 'tun.open': return { doing: `opening queues of ${op.mode} ${op.name}`, object: `${op.mode} ${op.name}` };
  }
}

const generic: Record<string, string> = {
  EEXIST: 'it already exists',
  ENODEV: 'no such link',
  ENOENT: 'no such object',
  ESRCH: 'no such object',
  EBUSY: 'the object is busy',
  EOPNOTSUPP: 'the kernel or the driver does not support this',
  EINVAL: 'the kernel rejected a value as invalid',
  ERANGE: 'a value is out of the range the kernel accepts',
  EPERM: 'not permitted (knit needs CAP_NET_ADMIN over this netns)',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'the address is not available on this link',
  ENETUNREACH: 'the gateway is not reachable through any link (add the on-link route first, or use onlink)',
  ENOBUFS: 'the kernel ran out of buffer space; retry',
  EBADF: 'the netlink handle is closed',
  ENOTDIR: 'a path component is not a directory',
};

/** Why the kernel said code to op, in words. Specific where the cause is well known. */
export function explain(op: Op | undefined, code: string): string {
  const name = op?.op;
  const family = name?.split('.')[0];
  switch (code) {
    case 'EEXIST':
      if (name === 'link.add' || name === 'tun.add') return 'a link with this name already exists';
      if (name === 'link.set') return 'another link already has this name';
      if (name === 'addr.add') return 'the address is already on the link';
      if (name === 'route.add') return 'a route to this destination with the same table and metric already exists';
      if (name === 'neigh.add') return 'an entry for this address already exists';
      if (name === 'qdisc.add') return 'the link already has an ingress or clsact qdisc';
      if (name === 'filter.add') return 'a filter with this priority already exists on that hook';
      break;
    case 'ENODEV':
      if (name === 'tun.open') return 'no such tun/tap device';
      return 'no such link';
    case 'ENOENT':
      if (name === 'sysctl.set' || name === 'sysctl.get') return 'no such sysctl (misspelt key, or the interface it names is not in this netns)';
      if (name === 'neigh.del') return 'no such neighbour entry';
      if (family === 'qdisc' || family === 'filter') return 'no such qdisc or filter on the link';
      if (name === 'route.del') return 'no such route';
      if (name === 'tun.add') return '/dev/net/tun is missing (no tun driver)';
      break;
    case 'ESRCH':
      if (family === 'route') return 'no such route';
      break;
    case 'EADDRNOTAVAIL':
      if (name === 'addr.del') return 'the address is not on the link';
      if (family === 'route') return 'the source address is not configured on any link';
      break;
    case 'EBUSY':
      if (name === 'link.set') return 'the link is busy (a rename needs the link down)';
      if (name === 'tun.add') return 'a non-tun device already uses this name';
      if (name === 'tun.open') return 'the device has a queue attached already (single-queue), or its flags differ';
      break;
    case 'EOPNOTSUPP':
      if (name === 'vf.set') return 'the link does not support SR-IOV VF settings (not a PF, or its driver lacks the op)';
      if (name === 'link.set') return 'the link does not support this change (hairpin and learning need a bridge port, bridgeNetfilter a bridge)';
      if (name === 'link.delGroup') return 'the group holds a link that cannot be deleted (e.g. a physical one)';
      break;
    case 'EINVAL':
      if (name === 'qdisc.del' || name === 'filter.del') return 'the link has no such qdisc';
      if (name === 'filter.add') return 'the link has no qdisc for that hook (add an ingress or clsact qdisc first)';
      if (name === 'tun.open') return 'the device was made with other flags (tap/tun, vnet_hdr, multi-queue must match)';
      if (name === 'link.set') return 'the kernel rejected a value (e.g. an MTU outside the link\'s range)';
      break;
    case 'ERANGE':
      if (name === 'link.add' || name === 'link.set') return 'an MTU or queue length is out of range for this link';
      break;
  }
  return generic[code] ?? 'the kernel refused';
}

/** A native error → KernelError with a sentence naming what, where and why. Errors that are
 * not from the kernel (TypeError and RangeError for bad op fields) pass through unchanged. */
export function toKernelError(err: unknown, ops: readonly Op[] | Op | undefined, netns: string | undefined): unknown {
  const e = err as NativeOpError;
  if (!(e instanceof Error) || typeof e.code !== 'string' || typeof e.errno !== 'number') return err;
  const list = ops === undefined ? [] : Array.isArray(ops) ? ops : [ops];
  const op = Array.isArray(ops) ? (e.index !== undefined ? list[e.index] : undefined) : list[0];
  const where = netns ? `netns ${netns}` : "the daemon's netns";
  const described = op ? describeOp(op) : undefined;
  const doing = described?.doing ?? (e.context ? e.context : 'opening a netlink handle');
  // A failed name lookup is about another link than the op's object: say which.
  const lookup = /^look up link (\S+) \((.+)\)$/.exec(e.context ?? '');
  let why = lookup ? `no link named ${lookup[1]} (${lookup[2]})` : explain(op, e.code);
  if (!op && e.code === 'ENOENT') why = 'the netns path does not exist';
  const extra: string[] = [];
  // A veth's peer name can collide too, possibly in another netns: say so rather than guess.
  if (op?.op === 'link.add' && op.kind === 'veth' && e.code === 'EEXIST' && !lookup)
    extra.push(`or the peer name ${op.peer?.name} is taken${op.peer?.netns ? ` in netns ${op.peer.netns}` : ''}`);
  if (e.extack) extra.push(`kernel: ${e.extack}`);
  // The addon's context adds news when it names a field or a side step (a netns path, an
  // alias on the peer); for tun/sysctl ops and plain requests it only repeats the op.
  const repeats = !op || e.context === op.op || /^(tun|sysctl)\./.test(op.op);
  if (e.context && !lookup && !repeats) extra.push(e.context);
  const tail = extra.length ? ` (${extra.join('; ')})` : '';
  const message = `${e.code} ${doing}: ${why} in ${where}${tail}`;
  return new KernelError(message, {
    code: e.code,
    errno: e.errno,
    op,
    index: e.index,
    object: described?.object,
    netns,
    extack: e.extack,
    context: e.context,
    completed: e.completed ?? [],
  });
}
