// A one-node cluster with knit in Multus's place, for the secondary-networks e2e tests: a real
// control plane with the NetworkAttachmentDefinition CRD and deploy/secondary-networks' RBAC, a
// knit daemon reading NADs with the ServiceAccount's token through a relay the tests can cut (the
// API away from knit alone), `knit install-cni` as the kubelet's only CNI config, and a kubelet
// on containerd 2. Everything goes in the scope's teardown, knit last (after the kubelet's pods).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanupDaemon, removeLinkQuietly, startDaemon, CLI, type Daemon, type DaemonOptions } from './daemon.js';
import { relay } from './api-relay.js';
import { startControlPlane, startKubelet, type ControlPlane, type Kubelet, type TeardownHost } from '../fixtures/kube-cluster.js';
import { BUSYBOX_IMAGE } from '../fixtures/kube-node.js';
import { fileNameOf } from '../../src/store/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const deploy = (f: string) => path.join(root, 'deploy', f);
export const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
export const STATUS = 'k8s.v1.cni.cncf.io/network-status';

export interface SecondaryCluster {
  cp: ControlPlane;
  node: Kubelet;
  /** The node's knit; a test that restarts it sets the new one here. */
  daemon: Daemon;
  /** knit's way to the API: cut() takes it away from knit alone, mend() gives it back. */
  link: Awaited<ReturnType<typeof relay>>;
  /** The test's dir: host-local's leases (dataDir) live here. */
  dir: string;
  dataDir: string;
  /** The pods' namespace. */
  ns: string;
  apply(obj: object): Promise<string>;
  /** A NAD in namespace default with this CNI config. */
  nad(name: string, config: object): object;
  /** A busybox pod annotated with these networks. */
  pod(name: string, networks: string, extra?: { metadata?: object }): object;
  ready(name: string, timeout?: string): Promise<string>;
  /** The pod's IPv4 addresses by interface, as `ip` inside it shows them. */
  addrsIn(name: string): Promise<Record<string, string>>;
  annotationsOf(name: string): Promise<Record<string, string>>;
  /** knit's record of the pod (knit list), and the record file as stored. */
  sandboxOf(name: string): any;
  recordOf(name: string): any;
  knitList(): any[];
  /** host-local's leases of a network. */
  leases(network: string): string[];
}

export async function startSecondaryCluster(scope: TeardownHost, o: { prefix: string; clusterCidr: string; subnet: string; daemon?: Partial<DaemonOptions>; hostLinks?: string[] }): Promise<SecondaryCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${o.prefix}`));
  const dataDir = path.join(dir, 'ipam');
  scope.teardown(() => {
    for (const l of o.hostLinks ?? []) removeLinkQuietly(l);
    rmSync(dir, { recursive: true, force: true });
  });
  const cp = await startControlPlane(scope, { prefix: o.prefix, clusterCidr: o.clusterCidr });
  await cp.kubectl('apply', '-f', deploy('secondary-networks/crd.yaml'));
  await cp.waitCrdEstablished('network-attachment-definitions.k8s.cni.cncf.io');
  await cp.kubectl('apply', '-f', deploy('namespace.yaml'), '-f', deploy('serviceaccount.yaml'), '-f', deploy('secondary-networks/rbac.yaml'));
  const link = await relay(new URL(cp.server));
  scope.teardown(() => link.cut());
  const token = (await cp.kubectl('create', 'token', 'knit', '-n', 'knit-system', '--duration=3600s')).trim();
  const kubeconfig = cp.kubeconfigFor(token);
  writeFileSync(kubeconfig, readFileSync(kubeconfig, 'utf8').replace(cp.server, link.server));
  const opts: DaemonOptions = {
    ...o.daemon, prefix: o.prefix, subnet: o.subnet,
    config: {
      ...o.daemon?.config,
      // The node's name is the kubelet fixture's default: knit watches that node's pods.
      secondaryNetworks: { kubeconfig, nodeName: `${o.prefix}node`, pluginDirs: ['/usr/lib/cni'], confDir: path.join(dir, 'conf.d'), lookupTimeoutMs: 1000 },
    },
  };
  const env = { daemon: await startDaemon(opts) } as SecondaryCluster;
  scope.teardown(() => cleanupDaemon(env.daemon, opts)); // before the kubelet's: runs after its pods are gone
  const cniBin = path.join(env.daemon.dir, 'cni-bin');
  const cniConf = path.join(env.daemon.dir, 'net.d');
  execFileSync(process.execPath, [CLI, 'install-cni', '--bin-dir', cniBin, '--conf-dir', cniConf, '--config', env.daemon.configPath, '--network', `${o.prefix}net`, '--cni-network', `${o.prefix}cni`]);
  const node = await startKubelet(scope, cp, { prefix: o.prefix, cniConfDir: cniConf, cniBinDir: cniBin });
  const ns = `${o.prefix}app`.replace(/-/g, '');
  await cp.kubectl('create', 'namespace', ns);

  const knitList = (): any[] => {
    const l = JSON.parse(execFileSync(process.execPath, [CLI, 'list', '--json', '--socket', env.daemon.socket], { encoding: 'utf8' }));
    return Array.isArray(l) ? l : (l.sandboxes ?? []);
  };
  const sandboxOf = (name: string) => knitList().find((s) => s.request.pod_name === name && s.request.pod_namespace === ns);
  return Object.assign(env, {
    cp, node, link, dir, dataDir, ns, knitList, sandboxOf,
    apply: (obj: object) => cp.kubectlInput(JSON.stringify(obj), 'apply', '-f', '-'),
    nad: (name: string, config: object) => ({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name, namespace: 'default' }, spec: { config: JSON.stringify(config) } }),
    pod: (name: string, networks: string, extra: { metadata?: object } = {}) => ({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name, namespace: ns, labels: { app: 'sec' }, ...extra.metadata, annotations: { [NETWORKS]: networks, ...(extra.metadata as any)?.annotations } },
      spec: {
        terminationGracePeriodSeconds: 1, automountServiceAccountToken: false, enableServiceLinks: false,
        containers: [{ name: 'c', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '1000000'] }],
      },
    }),
    ready: (name: string, timeout = '180s') => cp.kubectl('wait', '-n', ns, '--for=condition=Ready', `pod/${name}`, `--timeout=${timeout}`),
    async addrsIn(name: string) {
      const out = await cp.kubectl('exec', '-n', ns, name, '--', 'ip', '-o', '-4', 'addr', 'show');
      return Object.fromEntries(out.trim().split('\n').map((l) => l.split(/\s+/)).filter((f) => f[1] !== 'lo').map((f) => [f[1]!, f[3]!]));
    },
    annotationsOf: async (name: string) => (await cp.getJson('get', 'pod', '-n', ns, name)).metadata.annotations ?? {},
    recordOf: (name: string) => JSON.parse(readFileSync(path.join(env.daemon.dir, 'run', 'sandboxes', fileNameOf(sandboxOf(name).request.sandbox_id)), 'utf8')),
    leases: (net: string) => (existsSync(path.join(dataDir, net)) ? readdirSync(path.join(dataDir, net)).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)) : []),
  });
}
