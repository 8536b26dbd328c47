// The node side of knit's DRA driver: NodePrepareResources and NodeUnprepareResources for each
// claim the kubelet names, and what the attach of a pod needs from them. Per claim:
//   Prepare   read the claim from the API, take this driver's results, the pod from
//             status.reservedFor and the opaque config; plan the slow changes (PF-side VF
//             settings, vfio-pci binding, the CDI spec); journal the record; run the steps.
//   Unprepare run the recorded inverses, last first, and drop the record; the API is not asked,
//             so it works after the claim was deleted.
// Both are idempotent (the kubelet retries) and one claim's failure is that claim's error only.
// A claim's work runs under its own lock; devices are guarded across claims by the records.
import { KnitError } from '../base/errors.js';
import type { RecordStore } from '../store/index.js';
import type { Sysfs } from '../devices/sysfs.js';
import { KeyedLock } from '../core/keyed-lock.js';
import { claimForNode, type ClaimReader, type ClaimRef } from './claim.js';
import { CLAIM_RECORD_VERSION, claimWhat, type ClaimRecord, type PreparedClaimDevice } from './claim-record.js';
import { cdiDeviceId, cdiSpecStep } from './cdi.js';
import { planClaimDevice } from './prepare-device.js';
import { runSteps, undoSteps, type StepRunner } from './steps.js';
import type { Failpoint } from '../core/executor.js';

/** The claim records (a RecordStore in the daemon). */
export type ClaimStore = Pick<RecordStore<ClaimRecord>, 'get' | 'ids' | 'put' | 'remove'>;

export interface DraDriverOptions {
  driverName: string;
  /** This node's name: the pool of its devices. */
  nodeName: string;
  cdiDir: string;
  /** Where the runtime finds the host's /dev (config dra.devRoot; default "/"). */
  devRoot?: string;
  sysfs: Sysfs;
  claims: ClaimReader;
  records: ClaimStore;
  runner: StepRunner;
  /** Crash tests (KNIT_FAILPOINT=draprepare:<n>): fired before step n of each Prepare. */
  prepareFailpoint?: Failpoint;
  /** The sandbox whose attach holds this PCI device, if any: Unprepare waits for its detach. */
  sandboxHolding?(pciAddress: string): Promise<string | undefined>;
  log?: { info(o: object, m: string): void; warn(o: object, m: string): void };
  /** After a claim's Unprepare dropped its record (also one finished by start-up repair). */
  onUnprepared?(record: ClaimRecord): void;
}

/** A prepared device as the kubelet wants it back (DRAPlugin Device). */
export interface PreparedDeviceAnswer {
  requestNames: string[];
  poolName: string;
  deviceName: string;
  cdiDeviceIds: string[];
}

export type PrepareAnswer = { devices: PreparedDeviceAnswer[] } | { error: string };

const answerOf = (r: ClaimRecord): PrepareAnswer => ({
  devices: r.devices.map((d) => ({ requestNames: [d.request], poolName: d.pool, deviceName: d.device, cdiDeviceIds: d.cdiId ? [d.cdiId] : [] })),
});

export class DraDriver {
  private readonly locks = new KeyedLock();
  /** Devices a Prepare in flight is taking (DRA name -> claim UID): the records show them only
   * once that Prepare is journaled. */
  private readonly claiming = new Map<string, string>();

  constructor(private readonly o: DraDriverOptions) {}

  get driverName(): string {
    return this.o.driverName;
  }

  /** Every claim of the request, each on its own; the answer has one entry per claim UID. */
  async prepare(refs: ClaimRef[]): Promise<Map<string, PrepareAnswer>> {
    const out = new Map<string, PrepareAnswer>();
    await Promise.all(
      refs.map(async (ref) => {
        try {
          out.set(ref.uid, await this.locks.run(ref.uid, () => this.prepareOne(ref)));
        } catch (err) {
          const message = `${claimWhat(ref)} (uid ${ref.uid}): ${(err as Error).message}`;
          this.o.log?.warn({ claim: `${ref.namespace}/${ref.name}`, uid: ref.uid, err: (err as Error).message }, 'DRA prepare failed');
          out.set(ref.uid, { error: message });
        }
      }),
    );
    return out;
  }

  async unprepare(refs: ClaimRef[]): Promise<Map<string, { error?: string }>> {
    const out = new Map<string, { error?: string }>();
    await Promise.all(
      refs.map(async (ref) => {
        try {
          await this.locks.run(ref.uid, () => this.unprepareOne(ref.uid));
          out.set(ref.uid, {});
        } catch (err) {
          out.set(ref.uid, { error: `${claimWhat(ref)} (uid ${ref.uid}): ${(err as Error).message}` });
        }
      }),
    );
    return out;
  }

  /** The prepared claims reserved for a pod, and those of its claims whose Prepare has not finished. */
  claimsOfPod(podUid: string): { prepared: ClaimRecord[]; pending: ClaimRecord[] } {
    const prepared: ClaimRecord[] = [];
    const pending: ClaimRecord[] = [];
    for (const id of this.o.records.ids()) {
      const r = this.o.records.get(id);
      if (!r?.podUids.includes(podUid)) continue;
      (r.state === 'prepared' ? prepared : pending).push(r);
    }
    const byName = (a: ClaimRecord, b: ClaimRecord) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`);
    return { prepared: prepared.sort(byName), pending: pending.sort(byName) };
  }

  /** Start-up repair: an interrupted Prepare is rolled back (the kubelet asks again), an
   * interrupted Unprepare finished. Answers what it did. */
  async recover(): Promise<{ rolledBack: string[]; finished: string[]; failed: string[] }> {
    const done = { rolledBack: [] as string[], finished: [] as string[], failed: [] as string[] };
    for (const id of [...this.o.records.ids()]) {
      const r = this.o.records.get(id);
      if (!r || r.state === 'prepared') continue;
      if (r.state === 'interrupted') continue;
      const problems = await undoSteps(this.o.runner, r.steps);
      if (problems.length) {
        done.failed.push(`${claimWhat(r)}: ${problems.join('; ')}`);
        continue;
      }
      if (r.state === 'preparing') {
        await this.o.records.put(id, { ...r, state: 'interrupted', devices: [], steps: [] });
        done.rolledBack.push(`${r.namespace}/${r.name}`);
      } else {
        await this.o.records.remove(id);
        this.o.onUnprepared?.(r);
        done.finished.push(`${r.namespace}/${r.name}`);
      }
    }
    return done;
  }

  private async prepareOne(ref: ClaimRef): Promise<PrepareAnswer> {
    const taken: string[] = [];
    try {
      return await this.prepareClaiming(ref, taken);
    } finally {
      for (const d of taken) this.claiming.delete(d);
    }
  }

  private async prepareClaiming(ref: ClaimRef, taken: string[]): Promise<PrepareAnswer> {
    const recorded = this.o.records.get(ref.uid);
    if (recorded?.state === 'prepared') return answerOf(recorded);
    if (recorded?.state === 'unpreparing') throw new KnitError('UNAVAILABLE', 'its Unprepare has not finished; the kubelet\'s retry of it completes it');
    if (recorded) {
      // What an interrupted Prepare left (rolled back at start-up, or its record could not be
      // dropped after a failure): undo whatever is recorded, then prepare afresh.
      const problems = await undoSteps(this.o.runner, recorded.steps);
      if (problems.length) throw new KnitError('UNAVAILABLE', `undoing an interrupted Prepare failed: ${problems.join('; ')}`);
    }

    const claim = await this.o.claims.getClaim(ref.namespace, ref.name);
    if (!claim) throw new KnitError('NOT_FOUND', 'no such ResourceClaim in the API');
    const wanted = claimForNode(claim, ref, this.o.driverName);

    const devices: PreparedClaimDevice[] = [];
    const steps = [];
    const env = { sysfs: this.o.sysfs, runOps: this.o.runner.runOps.bind(this.o.runner), pool: this.o.nodeName };
    for (const d of wanted.devices) {
      try {
        const holder = this.holderOf(d.device, ref.uid);
        if (holder) throw new KnitError('FAILED_PRECONDITION', `it is prepared for ${claimWhat(holder)} (uid ${holder.uid})`);
        const other = this.claiming.get(d.device);
        if (other !== undefined && other !== ref.uid) throw new KnitError('FAILED_PRECONDITION', `claim uid ${other} is being prepared with it right now`);
        this.claiming.set(d.device, ref.uid);
        taken.push(d.device);
        const plan = await planClaimDevice(env, d);
        devices.push(plan.device);
        steps.push(...plan.steps);
      } catch (err) {
        (err as Error).message = `device ${d.device}: ${(err as Error).message}`;
        throw err;
      }
    }
    const withCdi = devices.filter((d) => d.charDevices.length);
    if (withCdi.length) {
      steps.push(cdiSpecStep(this.o.cdiDir, this.o.driverName, ref.uid, withCdi.map((d) => ({ device: d.device, charDevices: d.charDevices })), this.o.devRoot));
      for (const d of withCdi) d.cdiId = cdiDeviceId(this.o.driverName, ref.uid, d.device);
    }

    const record: ClaimRecord = {
      version: CLAIM_RECORD_VERSION, uid: ref.uid, namespace: ref.namespace, name: ref.name, state: 'preparing',
      podUids: wanted.podUids, devices, steps, preparedAt: new Date().toISOString(),
    };
    const done: ClaimRecord = { ...record, state: 'prepared' };
    if (steps.length) {
      await this.o.records.put(ref.uid, record); // the journal: before the first change
      try {
        await runSteps(this.o.runner, steps, this.o.prepareFailpoint);
      } catch (err) {
        // Undone (runSteps): the record goes. Should that write fail, start-up repair rolls back from it.
        await this.o.records.remove(ref.uid).catch(() => undefined);
        throw err;
      }
      await this.o.records.put(ref.uid, done);
    } else {
      // Nothing to change (a VF netdev without PF-side settings): nothing to roll back, so no
      // journal entry before it, and one write. A crash before it leaves nothing; one after it
      // but before the answer leaves a prepared claim, which the kubelet's retry is answered
      // from and its Unprepare drops. The crash tests' failpoint fires there.
      await this.o.records.put(ref.uid, done);
      if (this.o.prepareFailpoint?.index === 0) this.o.prepareFailpoint.fire();
    }
    this.o.log?.info({ claim: `${ref.namespace}/${ref.name}`, uid: ref.uid, devices: devices.map((d) => d.device), pods: wanted.podUids }, 'DRA claim prepared');
    return answerOf(done);
  }

  private async unprepareOne(uid: string): Promise<void> {
    const r = this.o.records.get(uid);
    if (!r) return; // never prepared here, or already unprepared: nothing of it to undo
    for (const d of r.devices) {
      const sandbox = await this.o.sandboxHolding?.(d.pciAddress);
      if (sandbox) throw new KnitError('UNAVAILABLE', `device ${d.device} (${d.pciAddress}) is still in sandbox ${sandbox}; it is given back when that sandbox is detached (CNI DEL, Detach), and the kubelet retries`);
    }
    await this.o.records.put(uid, { ...r, state: 'unpreparing' });
    const problems = await undoSteps(this.o.runner, r.steps);
    if (problems.length) throw new KnitError('UNAVAILABLE', `restoring its devices failed, the kubelet retries: ${problems.join('; ')}`);
    await this.o.records.remove(uid);
    this.o.onUnprepared?.(r);
    this.o.log?.info({ claim: `${r.namespace}/${r.name}`, uid }, 'DRA claim unprepared');
  }

  /** The other claim whose record holds this device. */
  private holderOf(device: string, uid: string): ClaimRecord | undefined {
    for (const id of this.o.records.ids()) {
      const r = this.o.records.get(id);
      if (r && r.uid !== uid && r.devices.some((d) => d.device === device)) return r;
    }
    return undefined;
  }
}
