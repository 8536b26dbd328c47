// What the sandbox manager needs from the rest of the daemon, as interfaces: the composition
// root (src/daemon/serve.ts) plugs in the real record store, IPAM, netns checks, extensions and
// action runner; the unit tests plug in fakes (test/unit/manager.test.ts).
import type { ClusterNetworkStatus } from '../cluster/types.js';
import type { NetworkSpec, Strategy } from '../base/strategy.js';
import type { KnitError } from '../base/errors.js';
import type { AttachRequest, AttachResult, Extension, RuntimeKind } from '../base/types.js';
import type { ActionRunner, Failpoint } from './executor.js';
import type { NetnsIdentity, SandboxRecord } from './record.js';
import type { PreparedPut } from '../store/record-store.js';

/** src/core/reaper.ts: kick() after parking devices (with the sandbox netns when some were
 * parked there); whenReaped() resolves once they are gone. */
export interface ReaperPort {
  kick(netns?: NetnsIdentity): void;
  whenReaped(): Promise<void>;
}

export interface RecordStorePort<T> {
  get(id: string): T | undefined;
  values(): Iterable<T>;
  put(id: string, doc: T): Promise<void>;
  /** put()'s serialization now and its write at commit(): the store's work done while the
   * caller waits on something else. Optional: a caller without it puts. */
  prepare?(id: string, doc: T): PreparedPut;
  remove(id: string): Promise<void>;
  /** Records per state, kept without parsing them (RecordStore's summarize); optional: without
   * it, counts come from values(). */
  tally?(): ReadonlyMap<string, number>;
}

export interface IpamPort {
  allocate(network: string, family: 4 | 6, owner: string): { address: string; prefixLen: number; gateway?: string };
  /** What allocate would answer, taking nothing (knit plan). */
  preview(network: string, family: 4 | 6, owner: string): { address: string; prefixLen: number; gateway?: string };
  /** Holds a given address; answers it in canonical text. */
  reserve(network: string, address: string, owner: string): { address: string };
  /** Throws what reserve would, holding nothing. */
  checkReserve(network: string, address: string, owner: string): void;
  release(owner: string): void;
  usage(network: string): { family: 4 | 6; subnet: string; size: number; used: number; free: number }[];
}

export interface NetnsPort {
  /** Throws KnitError INVALID_ARGUMENT naming netns_path when it is not a usable netns. */
  identify(path: string): NetnsIdentity;
  /** A snapshot answering whether a recorded namespace is gone: no longer at its path, and
   * nothing else (a moved bind mount, a process) refers to it. */
  goneChecker(): (id: NetnsIdentity) => boolean;
  /** What the namespace at `path` is to a sandbox recorded in `sandbox`, by (dev, inode):
   * the same one, the host's (or the daemon's own, however reached: a bind mount, a symlink),
   * another live one, none (nothing there, or a file that is no namespace), or unknown (knit
   * cannot open it: EACCES, say). */
  relation(path: string, sandbox: NetnsIdentity): NetnsRelation;
}

export type NetnsRelation = 'same' | 'host' | 'other' | 'none' | 'unknown';

export interface ExtensionsPort {
  list(): Extension[];
  register(ext: Extension): Promise<void>;
  unregister(name: string): Promise<void>;
  /** Calls every extension of the phase in order; throws when a required one fails. */
  notify(phase: Extension['phase'], result: AttachResult, req: AttachRequest): Promise<void>;
  missingRequired(): string[];
}

export interface ManagerHooks {
  /** Crash tests: fire before this step of every attach / this inverse of every detach. */
  attachFailpoint?: Failpoint;
  detachFailpoint?: Failpoint;
  /** The same for the steps of every AddInterface / the inverses of every RemoveInterface. */
  addInterfaceFailpoint?: Failpoint;
  removeInterfaceFailpoint?: Failpoint;
  onAttach?(sandboxId: string, ms: number, error?: KnitError): void;
  onDetach?(sandboxId: string, ms: number, error?: KnitError): void;
  /** A sandbox whose netns is gone was detached by knit itself (gone-netns.ts); `trigger` says
   * what started the sweep. */
  onReaped?(sandboxId: string, netns: NetnsIdentity, trigger: string, error?: KnitError): void;
  /** A sweep for sandboxes whose netns is gone starts (trigger: start-up, timer, link-gone, ...). */
  onGoneNetnsSweep?(trigger: string): void;
}

export interface ManagerDeps {
  networks(): Map<string, NetworkSpec>;
  defaultNetwork(): string;
  /** Networks whose host side could not be set up, with the reason. */
  unreadyNetworks(): Map<string, string>;
  records: RecordStorePort<SandboxRecord>;
  ipam: IpamPort;
  runner: ActionRunner;
  netns: NetnsPort;
  strategies: Partial<Record<RuntimeKind, Strategy>>;
  extensions: ExtensionsPort;
  reaper: ReaperPort;
  /** VM hand-off by fd: adds fresh one-time tokens to answers; forgets them on detach. */
  handoff?: { decorate(result: AttachResult): AttachResult; forget(sandboxId: string): void };
  hooks?: ManagerHooks;
  /** sysfs root for device attachments (config sysfsRoot; default '/sys'). */
  sysfsRoot?: () => string;
  /** Where Kata DAN files are confined (config kata.danDir; absent: Kata's default). */
  danDir?: () => string;
  /** Whether a file exists on the node: strategies ask about device nodes (PrepareContext). */
  pathExists?: (path: string) => boolean;
  /** Conditions an operator must see in NodeStatus.message that do not make the node unready
   * (e.g. queued CNI DELs that gave up). */
  conditions?: () => Promise<string[]>;
  /** A network that spans the cluster: the node's view (src/daemon/cluster.ts). */
  cluster?: ClusterPort;
  /** NetworkPolicy, when the config turns it on: which networks it is enforced on. */
  policy?: PolicyPort;
}

export interface PolicySourceStatus {
  source: string;
  state: string;
  detail: string;
}

export interface PolicyPort {
  /** Whether a pod whose default interface is on this network is subject to NetworkPolicy. */
  enforces(network: string): boolean;
  /** Where policy's view of the cluster comes from, and how that is. */
  status(): PolicySourceStatus;
}

export interface ClusterPort {
  /** Reads the kernel: each peer's inPlace is as of now. */
  status(): Promise<{ node: string; source: string; state: string; detail: string; networks: ClusterNetworkStatus[] }>;
  /** What the kernel lacks or holds beyond the node list; changes nothing. */
  check(): Promise<string[]>;
}
