// Calls a registered extension's knit.v1.Extension/Notify on its unix socket with the full
// attach result. An answer with ok=false counts as a failure, with the extension's message.
import * as grpc from '@grpc/grpc-js';
import type { AttachRequest, AttachResult, Extension } from '../base/types.js';
import { knitProto } from './proto.js';
import { phaseToWire, resultToWire, runtimeToWire } from './wire.js';

/** An extension gets this long to answer; a hung mesh agent must not hang every attach. */
const NOTIFY_DEADLINE_MS = 5_000;

export function callExtension(ext: Extension, phase: Extension['phase'], result: AttachResult, req: AttachRequest): Promise<void> {
  const { Extension: Client } = knitProto();
  const target = ext.endpoint.startsWith('unix:') ? ext.endpoint : `unix://${ext.endpoint}`;
  const client = new Client(target, grpc.credentials.createInsecure());
  const event = {
    phase: phaseToWire(phase),
    sandbox: {
      sandbox_id: req.sandboxId,
      pod_name: req.podName ?? '',
      pod_namespace: req.podNamespace ?? '',
      pod_uid: req.podUid ?? '',
      netns_path: req.netnsPath,
      runtime: runtimeToWire(req.runtime),
    },
    result: resultToWire(result),
  };
  return new Promise<void>((resolve, reject) => {
    (client as any).Notify(event, { deadline: Date.now() + NOTIFY_DEADLINE_MS }, (err: grpc.ServiceError | null, reply: { ok: boolean; message: string }) => {
      client.close();
      if (err) reject(new Error(err.details || err.message));
      else if (!reply.ok) reject(new Error(reply.message || 'extension answered not ok'));
      else resolve();
    });
  });
}
