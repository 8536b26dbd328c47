// A KNI client as the POC's callers build it: from proto/kni/api.proto (the v0.0.8 field list),
// nothing from knit.v1. runKniLifecycle drives the kubelet-fork sequence against any socket,
// so the same client runs against the API layer here and against the real daemon later.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';

export interface KniClient extends grpc.Client {
  [rpc: string]: any;
}

export function kniDefinition(): grpc.ServiceClientConstructor {
  // The POC's Go clients see proto field names as-is; keepCase mirrors that.
  const def = protoLoader.loadSync(path.resolve('proto/kni/api.proto'), {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return (grpc.loadPackageDefinition(def) as any).kni.KNI as grpc.ServiceClientConstructor;
}

export function kniClient(socketPath: string): KniClient {
  const KNI = kniDefinition();
  // The kubelet fork dials insecure gRPC with a 16 MiB message limit.
  return new KNI(`unix:${socketPath}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
  }) as KniClient;
}

export function kniCall<Res = any>(client: KniClient, rpc: string, req: object): Promise<Res> {
  return new Promise((resolve, reject) => {
    client[rpc](req, { deadline: Date.now() + 30_000 }, (err: grpc.ServiceError | null, res: Res) =>
      err ? reject(err) : resolve(res),
    );
  });
}

export interface Pod {
  name: string;
  namespace: string;
  uid: string;
  id: string;
  netnsPathPrefix: string;
}

/** CreateNetwork -> AttachInterface -> QueryPodNetwork -> DetachInterface -> DeleteNetwork. */
export async function runKniLifecycle(client: KniClient, pod: Pod) {
  const created = await kniCall(client, 'CreateNetwork', {
    name: pod.name,
    uid: pod.uid,
    namespace: pod.namespace,
    netns_path_prefix: pod.netnsPathPrefix,
    labels: { app: pod.name },
  });
  const attached = await kniCall(client, 'AttachInterface', {
    name: pod.name,
    id: pod.id,
    namespace: pod.namespace,
    isolation: { path: created.netns_path, type: 'Network Namespace' },
    dns_config: { servers: ['10.96.0.10'], searches: [`${pod.namespace}.svc.cluster.local`], options: ['ndots:5'] },
    port_mappings: [{ protocol: 'TCP', container_port: 8080, host_port: 0, host_ip: '' }],
    labels: { app: pod.name },
    annotations: { 'kni.dev/test': 'yes' },
    extradata: {},
  });
  const queried = await kniCall(client, 'QueryPodNetwork', { name: pod.name, id: pod.id, namespace: pod.namespace });
  const detached = await kniCall(client, 'DetachInterface', {
    name: pod.name,
    id: pod.id,
    namespace: pod.namespace,
    isolation: { path: created.netns_path, type: 'Network Namespace' },
  });
  const deleted = await kniCall(client, 'DeleteNetwork', {
    id: pod.id,
    name: pod.name,
    namespace: pod.namespace,
    netns_path: created.netns_path,
  });
  return { created, attached, queried, detached, deleted };
}
