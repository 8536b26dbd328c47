// knit's DRA driver for NICs, started by the daemon only when the config has a `dra` block
// (src/daemon/serve.ts imports this module lazily, so a node without it loads none of it):
// the claim records, start-up repair, the kubelet's two sockets, the ResourceSlice of this
// node's devices, and the attach wrapper that adds a pod's prepared devices to its sandbox.
import os from 'node:os';
import path from 'node:path';
import type { SandboxService } from '../base/types.js';
import type { DraSettings } from '../config/index.js';
import { RecordStore } from '../store/index.js';
import { Sysfs } from '../devices/sysfs.js';
import { scanInventory } from '../devices/inventory.js';
import { sandboxHoldingIn, withClaimedDevices } from './attach.js';
import { CLAIM_RECORD_VERSION, type ClaimRecord } from './claim-record.js';
import { ClaimStatusWriter } from './claim-status.js';
import { DraDriver } from './driver.js';
import { claimReader, type KubeApi } from './kube-port.js';
import { kubeletSockets, startKubeletServer } from './kubelet-server.js';
import { publishSlice } from './slices.js';
import type { StepRunner } from './steps.js';
import type { Failpoint } from '../core/executor.js';

export interface DraLog {
  info(o: object, m: string): void;
  warn(o: object, m: string): void;
}

export interface DraStartOptions {
  settings: DraSettings;
  runDir: string;
  sysfsRoot: string;
  runner: StepRunner;
  api: KubeApi;
  log: DraLog;
  onRegistration?(registered: boolean, error: string): void;
  /** Crash tests: KNIT_FAILPOINT=draprepare:<n> (src/daemon/failpoints.ts). */
  prepareFailpoint?: Failpoint;
  /** How often the inventory is read again for the ResourceSlice (ms). */
  sliceIntervalMs?: number;
}

export interface Dra {
  driver: DraDriver;
  /** The sandbox service with pods' claimed devices added at attach. */
  wrap(service: SandboxService): SandboxService;
  close(): Promise<void>;
}

export function nodeNameOf(settings: DraSettings, env: NodeJS.ProcessEnv = process.env): string {
  return settings.nodeName ?? env.NODE_NAME ?? os.hostname();
}

export async function startDra(o: DraStartOptions): Promise<Dra> {
  const s = o.settings;
  const nodeName = nodeNameOf(s);
  const records = await RecordStore.open<ClaimRecord>(path.join(o.runDir, 'dra-claims'), undefined, {
    formatVersion: CLAIM_RECORD_VERSION,
    onProblem: (p) => o.log.warn(p, 'DRA claim record store'),
  });
  const sysfs = new Sysfs(o.sysfsRoot);
  // The daemon starts the driver before its sandboxes are repaired; Unprepare asks which
  // sandbox holds a device only once wrap() has handed over the service.
  let gotSandboxes!: (service: SandboxService) => void;
  const sandboxes = new Promise<SandboxService>((resolve) => (gotSandboxes = resolve));
  const status = new ClaimStatusWriter(o.api, s.driverName, o.log);
  const driver = new DraDriver({
    driverName: s.driverName, nodeName, cdiDir: s.cdiDir, devRoot: s.devRoot, sysfs, claims: claimReader(o.api), records, runner: o.runner, log: o.log,
    ...(o.prepareFailpoint && { prepareFailpoint: o.prepareFailpoint }),
    sandboxHolding: async (pci) => sandboxHoldingIn(await sandboxes)(pci),
    onUnprepared: (record) => status.released(record),
  });
  const repaired = await driver.recover();
  if (repaired.rolledBack.length || repaired.finished.length || repaired.failed.length) o.log.warn(repaired, 'DRA start-up repair');

  const sockets = kubeletSockets(s.registryDir, s.pluginsDir, s.driverName);
  const server = await startKubeletServer({
    sockets,
    driver,
    onRegistration: (registered, error) => {
      if (registered) o.log.info({ driver: s.driverName, sockets }, 'registered with the kubelet as a DRA plugin');
      else o.log.warn({ driver: s.driverName, error }, 'the kubelet refused the DRA plugin registration');
      o.onRegistration?.(registered, error);
    },
  });

  let timer: NodeJS.Timeout | undefined;
  if (s.publishSlices) {
    const slice = { driver: s.driverName, nodeName, attributeDomain: s.attributeDomain };
    const publish = () =>
      scanInventory(sysfs)
        .then((inv) => publishSlice(o.api, inv, slice))
        .then((wrote) => wrote && o.log.info({ driver: s.driverName, node: nodeName }, 'ResourceSlice published'))
        .catch((err: Error) => o.log.warn({ err: err.message }, 'ResourceSlice publish failed; retried'));
    await publish();
    timer = setInterval(publish, o.sliceIntervalMs ?? 30_000);
    timer.unref();
  }

  return {
    driver,
    wrap: (service) => {
      gotSandboxes(service);
      return withClaimedDevices(service, driver, {
        onAttached: (_req, result, claims) => {
          for (const c of claims) status.attached(c, result);
        },
        onDetached: (claims) => {
          for (const c of claims) status.released(c);
        },
      });
    },
    async close() {
      if (timer) clearInterval(timer);
      await server.close();
      await status.settled();
    },
  };
}
