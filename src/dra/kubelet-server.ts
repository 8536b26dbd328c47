// The two sockets the kubelet talks to a DRA driver on (kubelet plugin watcher; k8s.io/kubelet
// pkg/apis/pluginregistration/v1 and pkg/apis/dra/{v1,v1beta1}):
//   <registryDir>/<driver>-reg.sock   pluginregistration.Registration: GetInfo answers type
//                                     "DRAPlugin", the driver name, the plugin socket and the
//                                     services served there; NotifyRegistrationStatus says
//                                     whether the kubelet took it.
//   <pluginsDir>/<driver>/dra.sock     DRAPlugin v1 and v1beta1 (same messages), so kubelets
//                                     1.32 to 1.35 all find a version they speak.
// Both sockets are 0600: the kubelet runs as root. The protos are loaded only here, so a node
// without the DRA driver never parses them.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KnitError } from '../base/errors.js';
import type { ClaimRef } from './claim.js';
import type { DraDriver, PrepareAnswer } from './driver.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const protoDir = () => process.env.KNIT_PROTO_DIR ?? path.join(root, 'proto');

export const DRA_SERVICES = ['v1.DRAPlugin', 'v1beta1.DRAPlugin'] as const;

export interface KubeletSockets {
  registration: string;
  plugin: string;
}

export function kubeletSockets(registryDir: string, pluginsDir: string, driver: string): KubeletSockets {
  return { registration: path.join(registryDir, `${driver}-reg.sock`), plugin: path.join(pluginsDir, driver, 'dra.sock') };
}

export interface KubeletServerOptions {
  sockets: KubeletSockets;
  driver: DraDriver;
  /** The kubelet's NotifyRegistrationStatus. */
  onRegistration?(registered: boolean, error: string): void;
  log?: { warn(o: object, m: string): void };
}

export interface KubeletServer {
  close(graceMs?: number): Promise<void>;
}

type Grpc = Record<string, any>;

function load(file: string): Grpc {
  const def = protoLoader.loadSync(path.join(protoDir(), file), { keepCase: true, defaults: true, longs: String, enums: String });
  return grpc.loadPackageDefinition(def) as Grpc;
}

interface WireClaim { namespace: string; uid: string; name: string }

function claimRefs(claims: WireClaim[] | undefined): ClaimRef[] {
  return (claims ?? []).map((c, i) => {
    for (const key of ['namespace', 'uid', 'name'] as const) {
      if (!c[key]) throw KnitError.invalid(`claims[${i}].${key}`, 'is required');
    }
    return { namespace: c.namespace, uid: c.uid, name: c.name };
  });
}

function prepareWire(answers: Map<string, PrepareAnswer>) {
  const claims: Record<string, unknown> = {};
  for (const [uid, a] of answers) {
    claims[uid] = 'error' in a
      ? { devices: [], error: a.error }
      : { devices: a.devices.map((d) => ({ request_names: d.requestNames, pool_name: d.poolName, device_name: d.deviceName, cdi_device_ids: d.cdiDeviceIds })), error: '' };
  }
  return { claims };
}

function unary<Req, Res>(fn: (req: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    fn(call.request).then(
      (res) => callback(null, res),
      (err: unknown) => {
        const code = err instanceof KnitError && err.code === 'INVALID_ARGUMENT' ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL;
        callback({ code, details: (err as Error).message });
      },
    );
  };
}

async function listen(server: grpc.Server, socket: string): Promise<void> {
  await mkdir(path.dirname(socket), { recursive: true, mode: 0o750 });
  // A socket left by a knit that died goes (the kubelet would find a dead endpoint there);
  // anything else at that path is not knit's and is left alone.
  const st = await lstat(socket).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (st && !st.isSocket()) throw new Error(`${socket} exists and is not a socket; refusing to replace it`);
  if (st) await unlink(socket);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
  await chmod(socket, 0o600);
}

export async function startKubeletServer(o: KubeletServerOptions): Promise<KubeletServer> {
  const handlers = {
    NodePrepareResources: unary(async (req: { claims?: WireClaim[] }) => prepareWire(await o.driver.prepare(claimRefs(req.claims)))),
    NodeUnprepareResources: unary(async (req: { claims?: WireClaim[] }) => {
      const answers = await o.driver.unprepare(claimRefs(req.claims));
      const claims: Record<string, { error: string }> = {};
      for (const [uid, a] of answers) claims[uid] = { error: a.error ?? '' };
      return { claims };
    }),
  };
  const plugin = new grpc.Server({ 'grpc.enable_channelz': 0 });
  const v1 = load('kubelet/dra/v1/api.proto').k8s.io.kubelet.pkg.apis.dra.v1;
  const v1beta1 = load('kubelet/dra/v1beta1/api.proto').k8s.io.kubelet.pkg.apis.dra.v1beta1;
  plugin.addService(v1.DRAPlugin.service, handlers);
  plugin.addService(v1beta1.DRAPlugin.service, handlers);

  const registration = new grpc.Server({ 'grpc.enable_channelz': 0 });
  const reg = load('kubelet/pluginregistration/v1/api.proto').pluginregistration;
  registration.addService(reg.Registration.service, {
    GetInfo: unary(async () => ({ type: 'DRAPlugin', name: o.driver.driverName, endpoint: o.sockets.plugin, supported_versions: [...DRA_SERVICES] })),
    NotifyRegistrationStatus: unary(async (req: { plugin_registered: boolean; error: string }) => {
      o.onRegistration?.(req.plugin_registered, req.error);
      return {};
    }),
  });

  // The plugin socket first: once the registration socket appears, the kubelet may call it.
  await listen(plugin, o.sockets.plugin);
  await listen(registration, o.sockets.registration);

  const stop = (server: grpc.Server, graceMs: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => server.forceShutdown(), graceMs);
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  return {
    async close(graceMs = 2000) {
      // The registration socket goes first: the kubelet drops the plugin when it disappears.
      await stop(registration, graceMs);
      await unlink(o.sockets.registration).catch(() => undefined);
      await stop(plugin, graceMs);
      await unlink(o.sockets.plugin).catch(() => undefined);
    },
  };
}
