// knit in Multus's place (config `secondaryNetworks`, docs/secondary-networks.md): what the CNI
// frontend asks when a pod's primary interface is added. Loaded with import() only when the
// block is in the config, so a node without it loads none of this, nor the API client.
// Definitions come from the config's literal map, or from the API: an informer of every
// NetworkAttachmentDefinition (kept trimmed to what knit reads), with a read bounded by
// lookupTimeoutMs for one it does not hold; the pod's annotations from the runtime, else a
// bounded read; network-status written in the background (network-status-writer.ts).
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { NetworkSpec } from '../base/strategy.js';
import { CniCode, KnitError } from '../base/errors.js';
import type { SecondaryNetworksSettings } from '../config/index.js';
import type { AttachmentDefinition } from '../netattach/definition.js';
import { configFromFiles } from '../netattach/definition.js';
import { DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION } from '../netattach/selection.js';
import type { PodRef, SecondaryNetworksPort, SecondarySettings } from '../cni-frontend/pod-networks.js';
import type { Informer, KubeClient, NetworkAttachmentDefinition, Pod } from '../kube/index.js';
import type { SandboxRecord } from '../core/record.js';
import { parseConflist } from '../cni-exec/conflist.js';
import { delStaleAttachments } from '../cni-exec/stale.js';

export const NAD_PATH = '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions';
const nadPath = (ns: string, name: string) => `/apis/k8s.cni.cncf.io/v1/namespaces/${ns}/network-attachment-definitions/${name}`;

export interface SecondaryNetworks {
  port: SecondaryNetworksPort;
  /** Called with a pod of this node whose networks annotation knit has not followed yet: each
   * change, each pod at the first list, and every pod again each resyncMs (a NAD made since). */
  onPodNetworks(fn: (pod: PodRef, annotations: Record<string, string>) => void): void;
  close(): Promise<void>;
}

export interface SecondaryOptions {
  settings: () => SecondaryNetworksSettings;
  knitNetwork: (name: string) => NetworkSpec | undefined;
  log: Logger;
  userAgent: string;
}

/** The annotations knit reads of a pod. */
const POD_ANNOTATIONS_KEPT = [NETWORKS_ANNOTATION, DEFAULT_NETWORK_ANNOTATION];

/** What the pod informer keeps of a pod: its names, UID and the networks it asks for. */
export function podKept(p: Pod): Pod {
  const { name, namespace, uid, resourceVersion, annotations = {} } = p.metadata;
  const kept = Object.fromEntries(POD_ANNOTATIONS_KEPT.filter((k) => k in annotations).map((k) => [k, annotations[k]!]));
  return { metadata: { name, namespace, uid, resourceVersion, annotations: kept } };
}

/** How often every pod is looked at again: a NAD made after a pod asked for it. */
const POD_RESYNC_MS = 300_000;

/** What the informer keeps of a definition: its names, its config. */
export function definitionKept(d: NetworkAttachmentDefinition): NetworkAttachmentDefinition {
  const { name, namespace, uid, resourceVersion } = d.metadata;
  return { metadata: { name, namespace, uid, resourceVersion }, spec: { config: d.spec?.config ?? '' } };
}

const asDefinition = (d: NetworkAttachmentDefinition): AttachmentDefinition => ({ namespace: d.metadata.namespace ?? '', name: d.metadata.name, config: d.spec?.config ?? '' });

const unavailable = (what: string, err: unknown) =>
  new KnitError('UNAVAILABLE', `${what}: the Kubernetes API did not answer (${(err as Error).message}); try again`, { cniCode: CniCode.tryAgainLater, cause: err });

export async function startSecondaryNetworks(o: SecondaryOptions): Promise<SecondaryNetworks> {
  const common = {
    settings: (): SecondarySettings => o.settings(),
    knitNetwork: o.knitNetwork,
    async configFile(name: string): Promise<string | undefined> {
      const dir = o.settings().confDir;
      let names: string[];
      try {
        names = await readdir(dir);
      } catch {
        return undefined;
      }
      const files = await Promise.all(names.filter((n) => /\.(conf|json|conflist)$/.test(n)).map(async (n) => ({ file: n, text: await readFile(path.join(dir, n), 'utf8').catch(() => '') })));
      return configFromFiles(name, files);
    },
    notReady(): string | undefined {
      const file = o.settings().readinessIndicatorFile;
      return file && !existsSync(file) ? `the default network is not ready: ${file} (readinessIndicatorFile) does not exist` : undefined;
    },
  };
  const literal = o.settings().definitions;
  if (literal) {
    o.log.info({ definitions: Object.keys(literal).length }, 'secondary networks: definitions from the config; no Kubernetes API');
    const port: SecondaryNetworksPort = {
      ...common,
      async definition(namespace, name) {
        const config = o.settings().definitions?.[`${namespace}/${name}`];
        return config === undefined ? undefined : { namespace, name, config };
      },
      async podAnnotations() {
        return {};
      },
      publishStatus() {},
    };
    return { port, onPodNetworks() {}, close: async () => {} };
  }
  return startFromApi(o, common);
}

async function startFromApi(o: SecondaryOptions, common: Pick<SecondaryNetworksPort, 'settings' | 'knitNetwork' | 'configFile' | 'notReady'>): Promise<SecondaryNetworks> {
  const [{ Informer, KubeClient, KubeApiError, loadKubeAccess, backoffDelay, DEFAULT_BACKOFF }, { NetworkStatusWriter }] = await Promise.all([import('../kube/index.js'), import('./network-status-writer.js')]);
  const settings = o.settings();
  const access = loadKubeAccess({ ...(settings.kubeconfig && { kubeconfig: settings.kubeconfig }) });
  const client: KubeClient = new KubeClient(access, { userAgent: o.userAgent });
  const definitions: Informer<NetworkAttachmentDefinition> = new Informer<NetworkAttachmentDefinition>(client, NAD_PATH, { transform: definitionKept });
  definitions.onState((state, detail) => {
    if (state === 'unreachable') o.log.warn({ detail }, 'secondary networks: Kubernetes API unreachable; keeping the last NetworkAttachmentDefinitions');
    else o.log.info({ state, detail }, 'secondary networks: NetworkAttachmentDefinitions');
  });
  definitions.start();
  // This node's pods, for a networks annotation that changes while the pod runs.
  const nodeName = settings.nodeName ?? process.env.NODE_NAME ?? os.hostname();
  const pods: Informer<Pod> = new Informer<Pod>(client, '/api/v1/pods', { fieldSelector: `spec.nodeName=${nodeName}`, transform: podKept, resyncMs: POD_RESYNC_MS });
  const podListeners: ((pod: PodRef, annotations: Record<string, string>) => void)[] = [];
  pods.onChange((kind, pod, old) => {
    if (kind === 'delete') return;
    const annotations = pod.metadata.annotations ?? {};
    // An update that changed nothing knit reads is not news (a resync is: obj === old).
    if (kind === 'update' && old && old !== pod && POD_ANNOTATIONS_KEPT.every((k) => annotations[k] === old.metadata.annotations?.[k])) return;
    const ref = { namespace: pod.metadata.namespace ?? '', name: pod.metadata.name, uid: pod.metadata.uid ?? '' };
    for (const fn of podListeners) fn(ref, annotations);
  });
  pods.onState((state, detail) => {
    if (state === 'unreachable') o.log.warn({ detail }, 'secondary networks: Kubernetes API unreachable; keeping the last view of this node\'s pods');
  });
  pods.start();
  const writer = new NetworkStatusWriter(client, o.log, (n) => backoffDelay(n, DEFAULT_BACKOFF));
  /** A read that gives up after lookupTimeoutMs: an ADD never waits longer for the API. */
  const bounded = <T>(p: string) => client.get<T>(p, { signal: AbortSignal.timeout(o.settings().lookupTimeoutMs) });
  const port: SecondaryNetworksPort = {
    ...common,
    async definition(namespace, name) {
      const held = definitions.get(`${namespace}/${name}`);
      if (held) return asDefinition(held);
      // Not in the view: made a moment ago, or the view is not there yet. Ask, bounded.
      try {
        return asDefinition(definitionKept(await bounded<NetworkAttachmentDefinition>(nadPath(namespace, name))));
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) return undefined;
        throw unavailable(`NetworkAttachmentDefinition ${namespace}/${name}`, err);
      }
    },
    async podAnnotations(pod: PodRef) {
      const held = pods.get(`${pod.namespace}/${pod.name}`);
      if (held && held.metadata.uid === pod.uid) return held.metadata.annotations ?? {};
      try {
        const p = await bounded<Pod>(`/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`);
        if (pod.uid && p.metadata.uid !== pod.uid) throw new KnitError('FAILED_PRECONDITION', `pod ${pod.namespace}/${pod.name}: its UID is ${p.metadata.uid}, not ${pod.uid} (K8S_POD_UID): the pod was made again`);
        return p.metadata.annotations ?? {};
      } catch (err) {
        if (err instanceof KnitError && !(err instanceof KubeApiError)) throw err;
        throw unavailable(`pod ${pod.namespace}/${pod.name}`, err);
      }
    },
    publishStatus: (pod, text) => writer.publish(pod, text),
  };
  return {
    port,
    onPodNetworks: (fn) => void podListeners.push(fn),
    close: async () => {
      writer.close();
      await Promise.all([definitions.stop(), pods.stop()]);
      client.close();
    },
  };
}

/**
 * At start-up: every chain cached in the NADs' cache dir that no record holds is DEL'd from its
 * cache entry (src/cni-exec/stale.ts). After a node's reboot runDir (knit's records) is empty
 * while host-local's leases and the cache are on disk, and the runtime's DELs for the old pods
 * find no record: without this their addresses would leak (multus#891, #323, #239, #1087).
 */
export async function delUnrecordedAttachments(settings: SecondaryNetworksSettings, records: Iterable<SandboxRecord>, log: Logger): Promise<void> {
  const held = new Set<string>();
  for (const rec of records) {
    for (const s of rec.steps) {
      if (s.do.op === 'cni.add' && s.do.cacheDir === settings.cacheDir) held.add(`${parseConflist(s.do.conflist, 'record').name}/${s.do.containerId}/${s.do.ifName}`);
    }
  }
  const swept = await delStaleAttachments(settings.cacheDir, held, { pluginDirs: settings.pluginDirs, timeoutMs: settings.timeoutMs });
  if (swept.deleted.length || swept.errors.length) log.warn(swept, 'secondary networks: chains no record holds (a reboot\'s) given back');
}
