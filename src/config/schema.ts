// The shape of knit's config file, field by field. Every key is optional: an empty file (or
// none) gives the embedded default, which is this schema's defaults applied to `{}`. Unknown
// keys are errors, so a typo ("subnett") is reported instead of silently ignored. Checks that
// span fields (unique names, overlapping subnets, ...) are in checks.ts.

import { z } from 'zod/v3';
import { tryParseCidr, tryParseIp } from '../ipam/ip.js';

/** Pod network for the embedded default. 10.118.0.0/20 sits outside the ranges other tools
 * pick by default, so it is unlikely to clash on a node: kubeadm/flannel/kind/minikube/Talos
 * pods 10.244/16 and services 10.96/12 (up to 10.111), k3s/RKE 10.42-43, containerd and podman
 * 10.88-89, CRI-O 10.85, Weave 10.32/12, MicroK8s 10.1 and 10.152, GCP auto-mode VPCs
 * 10.128/9, Docker 172.17+, Calico 192.168/16, CGNAT/Tailscale 100.64/10. A /20 gives 4093
 * pod addresses, far above the kubelet's default of 110 pods per node. */
export const DEFAULT_SUBNET_V4 = '10.118.0.0/20';
/** Suggested IPv6 ULA prefix: fd + "kni" (6b 6e 69) + "t" (74). Not enabled by default:
 * dual-stack needs IPv6 on the node, which the default must not assume. */
export const SUGGESTED_SUBNET_V6 = 'fd6b:6e69:7400::/64';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** A string field checked by `problem`, which returns why the value is bad (or nothing). */
const checked = (problem: (v: string) => string | undefined) =>
  z.string().superRefine((value, ctx) => {
    const why = problem(value);
    if (why) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)} ${why}` });
  });

export const cidrText = checked((v) => (tryParseCidr(v) ? undefined : 'is not a valid CIDR'));
export const ipText = checked((v) => (tryParseIp(v) ? undefined : 'is not a valid IP address'));
const ipOrCidrText = checked((v) => (tryParseIp(v) || tryParseCidr(v) ? undefined : 'is not an IP address or CIDR'));
const absolutePath = checked((v) => (v.startsWith('/') && !v.includes('\0') ? undefined : 'is not an absolute path'));

/** A Kubernetes-style DNS label: network names end up in object names and annotations. */
const networkName = checked((v) =>
  /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(v) ? undefined : 'is not a valid network name (lower-case letters, digits and "-", 1-63 characters, starting and ending with a letter or digit)',
);

/** The kernel's dev_valid_name: 1-15 bytes, not "." or "..", no "/", ":" or white space. */
export function ifnameProblem(v: string): string | undefined {
  const bytes = Buffer.byteLength(v);
  if (bytes === 0 || bytes > 15) return `is not a valid interface name (${bytes} bytes; must be 1-15)`;
  if (v === '.' || v === '..' || /[/:\s\0]/.test(v)) return 'is not a valid interface name (no "/", ":", white space, "." or "..")';
  return undefined;
}
const ifname = checked(ifnameProblem);

/** host:port, [v6]:port; the host an IP address or a DNS name. */
const listenAddress = checked((v) => {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):([0-9]{1,5})$/.exec(v);
  const port = m ? Number(m[3]) : 0;
  if (!m || port < 1 || port > 65535) return 'is not a valid listen address (host:port or [v6]:port)';
  if (m[1] !== undefined && tryParseIp(m[1])?.family !== 6) return 'has a bracketed host that is not an IPv6 address';
  if (m[2] !== undefined && !tryParseIp(m[2]) && !/^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$/.test(m[2])) return 'has an invalid host';
  return undefined;
});

/** A pool's subnet: a CIDR, or NODE_SUBNET for the node's own entry of this family in
 * Node.spec.podCIDRs (or in cluster.nodes), learned at run time. */
export const NODE_SUBNET = 'node';
const subnetText = checked((v) => (v === NODE_SUBNET || tryParseCidr(v) ? undefined : `is not a valid CIDR (or "${NODE_SUBNET}": the node's podCIDR)`));

const poolSchema = z.strictObject({
  subnet: subnetText,
  /** Default: the first address after the network address. */
  gateway: ipText.optional(),
  rangeStart: ipText.optional(),
  rangeEnd: ipText.optional(),
  reserved: z.array(ipOrCidrText).default([]),
});

const routeSchema = z.strictObject({ dst: cidrText, gw: ipText.optional() });

const dnsSchema = z.strictObject({
  nameservers: z.array(ipText).default([]),
  search: z.array(z.string().min(1)).default([]),
  options: z.array(z.string().min(1)).default([]),
  domain: z.string().min(1).optional(),
});

/** Debian's containernetworking-plugins, which knit ships (scripts/setup.sh, the image): never
 * the host's /opt/cni/bin unless the config names it. */
export const DEFAULT_CNI_PLUGIN_DIRS = ['/usr/lib/cni'];
/** libcni's cache directory, so a runtime's cached attachments and knit's are one set. */
export const DEFAULT_CNI_CACHE_DIR = '/var/lib/cni';

/** mode "cni": the network is a CNI plugin chain that knit executes (src/cni-exec). */
const cniSchema = z
  .strictObject({
    /** The conflist itself: its JSON text, or the object. */
    conflist: z.union([z.string().min(2), z.record(z.string(), z.unknown())]).optional(),
    /** Or a file holding it, e.g. a mounted ConfigMap key; read at each attach. */
    conflistFile: absolutePath.optional(),
    pluginDirs: z.array(absolutePath).min(1).default(DEFAULT_CNI_PLUGIN_DIRS),
    cacheDir: absolutePath.default(DEFAULT_CNI_CACHE_DIR),
    /** Deadline of one plugin exec; a plugin still running then is killed. */
    timeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  })
  .refine((c) => (c.conflist === undefined) !== (c.conflistFile === undefined), { message: 'give exactly one of conflist and conflistFile' });

const networkSchema = z.strictObject({
  name: networkName,
  mode: z.enum(['bridge', 'routed', 'cni']).default('bridge'),
  /** mode "cni" only: the plugin chain. */
  cni: cniSchema.optional(),
  /** Linux bridge knit creates (bridge mode). Default: the network name. Ignored when routed. */
  bridge: ifname.optional(),
  mtu: z.number().int().min(68).max(65535).default(1500),
  /** Let a pod reach itself through a service (bridge port hairpin mode): on unless set false,
   * as Kubernetes expects of every pod (kube-proxy masquerades the pod's flow to its own
   * Service, and the bridge must send it back out the port it came in by). */
  hairpin: z.boolean().default(true),
  /** Bridge mode only; default true: traffic bridged between this network's pods passes the
   * node's netfilter hooks (the bridge's own nf_call_iptables / nf_call_ip6tables, never the
   * netns-wide sysctls), as Services and NetworkPolicy between pods on one node need. */
  bridgeNetfilter: z.boolean().optional(),
  ipv4: poolSchema.optional(),
  ipv6: poolSchema.optional(),
  routes: z.array(routeSchema).default([]),
  dns: dnsSchema.optional(),
  /** How pods on other nodes are reached (docs/cluster.md). Absent: this network is the node's
   * alone, as in a one-machine setup. routes: `podCIDR via <node IP>` per peer on the same
   * link; vxlan: a VTEP and per peer route + neighbour + FDB entry; none: only the node's own
   * block is announced (route protocol ROUTE_PROTOCOL) for a BGP speaker to export. */
  crossNode: z.enum(['routes', 'vxlan', 'none']).optional(),
  /** crossNode vxlan: the VTEP. Its pods' MTU is `mtu` less the encapsulation (50, or 70 on
   * an IPv6 underlay). */
  vxlan: z
    .strictObject({
      vni: z.number().int().min(1).max(16_777_215).default(1),
      /** The Linux kernel's own default, which flannel uses too. */
      port: z.number().int().min(1).max(65535).default(8472),
      /** Default: "knit-vx<vni>". */
      device: ifname.optional(),
    })
    .optional(),
  /** With crossNode set: pod traffic to anything but the cluster's pod subnets, the service
   * CIDRs and nonMasqueradeCIDRs leaves the node with the node's address (nftables). */
  /** Default true. */
  masquerade: z.boolean().optional(),
  nonMasqueradeCIDRs: z.array(cidrText).optional(),
});

/** A node as the literal map gives it (the fields knit reads of a Node object). */
const staticNodeSchema = z.strictObject({
  podCIDRs: z.array(cidrText).max(2).default([]),
  internalIPs: z.array(ipText).max(2).default([]),
});

/** The cluster this node belongs to: where knit learns the nodes' pod subnets and addresses. */
const clusterSchema = z.strictObject({
  /** This node's name. Default: $NODE_NAME (the DaemonSet sets it from spec.nodeName), else the host name. */
  nodeName: z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a DNS subdomain (a Kubernetes node name)').optional(),
  /** A kubeconfig file for the API. Default: $KUBECONFIG, else the pod's ServiceAccount (in-cluster). */
  kubeconfig: absolutePath.optional(),
  /** The nodes, literally: for clusters without a pod CIDR allocator, and tests. With it set
   * knit does not ask the Kubernetes API. */
  nodes: z.record(z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a DNS subdomain (a Kubernetes node name)'), staticNodeSchema).optional(),
  /** The cluster's pod ranges (kube-controller-manager --cluster-cidr) and service ranges:
   * never masqueraded. Every node's podCIDRs are left alone too, without being listed. */
  clusterCIDRs: z.array(cidrText).default([]),
  serviceCIDRs: z.array(cidrText).default([]),
});

/** A DNS subdomain (RFC 1123), as DRA driver names and attribute domains must be. */
const dnsSubdomain = checked((v) =>
  v.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(v) ? undefined : 'is not a DNS subdomain (lower-case labels of a-z, 0-9, "-", joined by ".", at most 63 characters)',
);

const draSchema = z.strictObject({
  /** The DRA driver name: in ResourceSlices, claim results, DeviceClass selectors, and as the
   * CDI vendor of the specs knit writes. Set it to "dra.net" to serve DeviceClasses written for dranet. */
  driverName: dnsSubdomain.default('knit.dev'),
  /** This node's name (its ResourceSlice pool). Default: $NODE_NAME, else the host name. */
  nodeName: z.string().min(1).max(253).optional(),
  /** Kubernetes API access: a kubeconfig file. Default: $KUBECONFIG, else in-cluster. */
  kubeconfig: absolutePath.optional(),
  /** The kubelet's plugin registry: knit's registration socket is <registryDir>/<driverName>-reg.sock. */
  registryDir: absolutePath.default('/var/lib/kubelet/plugins_registry'),
  /** The DRAPlugin service listens on <pluginsDir>/<driverName>/dra.sock. */
  pluginsDir: absolutePath.default('/var/lib/kubelet/plugins'),
  /** Where knit writes one CDI spec per prepared claim (knit.dev-<claim uid>.json), and nothing else. */
  cdiDir: absolutePath.default('/var/run/cdi'),
  /** Where the container runtime finds the host's /dev: a CDI device node's hostPath is
   * <devRoot><path> (its path in the container stays /dev/...). "/" writes no hostPath. */
  devRoot: absolutePath.default('/'),
  /** Domain of the device attributes knit publishes; "dra.net" keeps dranet's selectors working. */
  attributeDomain: dnsSubdomain.default('dra.net'),
  /** Publish this node's devices as ResourceSlices (off: another component publishes them). */
  publishSlices: z.boolean().default(true),
});

const k8sName = z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a DNS subdomain (a Kubernetes object name)');
const labels = z.record(z.string().min(1).max(317), z.string().max(63));

/** A pod as the literal source gives it (the fields policy reads of a Pod). */
const literalPodSchema = z.strictObject({
  namespace: k8sName,
  name: k8sName,
  labels: labels.default({}),
  /** status.podIPs; a pod of this node takes the addresses knit gave it instead. */
  ips: z.array(ipText).max(2).default([]),
  node: k8sName.optional(),
  hostNetwork: z.boolean().default(false),
  /** Named container ports (what a named policy port resolves to). */
  ports: z.array(z.strictObject({ name: z.string().min(1).max(15), port: z.number().int().min(1).max(65535), protocol: z.enum(['TCP', 'UDP', 'SCTP']).default('TCP') })).default([]),
});

/** Denied packets logged as JSON lines (docs/network-policy.md, "Denied flows in a log"):
 * nftables' `log group` on each deny path, behind one shared rate limit, read through
 * nfnetlink_log. `true` takes every default. */
const logDeniedSchema = z.union([
  z.literal(true).transform((): { group: number; rate: string; burst: number; file?: string } => ({ group: 100, rate: '10/second', burst: 20 })),
  z.strictObject({
    /** The nflog group knit binds (one socket per group and netns). */
    group: z.number().int().min(0).max(65535).default(100),
    /** At most this many packets a second, minute, hour or day are logged, the node's
     * denied packets together (nft `limit rate`); the rest are dropped unlogged. */
    rate: z.string().regex(/^[1-9][0-9]{0,8}\/(second|minute|hour|day)$/, 'must be "<n>/second" (or minute, hour, day)').default('10/second'),
    /** Packets logged at once beyond the rate. */
    burst: z.number().int().min(1).max(100_000).default(20),
    /** Append the lines to this file; without it they go to knit's log. */
    file: absolutePath.optional(),
  }),
]);

/** NetworkPolicy enforced by knit (docs/network-policy.md). Off unless this block is present;
 * its code (and, with the API as source, src/kube) is loaded only then. */
const networkPolicySchema = z.strictObject({
  /** The networks whose pods (by their default interface) policy applies to. Default: the
   * default network. bridge and routed networks only: a CNI chain's addresses are not knit's. */
  networks: z.array(z.string().min(1)).min(1).optional(),
  /** A kubeconfig for the API (Pods, Namespaces, NetworkPolicies). Default: cluster.kubeconfig,
   * $KUBECONFIG, else the pod's ServiceAccount. */
  kubeconfig: absolutePath.optional(),
  /** ClusterNetworkPolicy (policy.networking.k8s.io/v1beta1) as well: its Admin tier before
   * NetworkPolicy, its Baseline tier after (docs/network-policy.md, "ClusterNetworkPolicy").
   * From the API it needs the CRD of sigs.k8s.io/network-policy-api, installed by the user,
   * and RBAC on clusternetworkpolicies and nodes (deploy/rbac.yaml). */
  clusterNetworkPolicies: z.boolean().optional(),
  logDenied: logDeniedSchema.optional(),
  /** The cluster's pods, namespaces and policies, literally: with it knit never asks the API
   * (tests, and trying policy without Kubernetes). A config reload applies a new list. */
  literal: z
    .strictObject({
      namespaces: z.record(k8sName, z.strictObject({ labels: labels.default({}) })).default({}),
      pods: z.array(literalPodSchema).default([]),
      /** networking.k8s.io/v1 NetworkPolicy objects as the API serves them; what knit cannot
       * read is reported and fails closed (docs/network-policy.md). */
      policies: z.array(z.strictObject({ metadata: z.strictObject({ name: k8sName, namespace: k8sName }).passthrough(), spec: z.record(z.string(), z.unknown()) }).passthrough()).default([]),
      /** policy.networking.k8s.io/v1beta1 ClusterNetworkPolicy objects as the API serves them
       * (with clusterNetworkPolicies on). */
      clusterNetworkPolicies: z.array(z.strictObject({ metadata: z.strictObject({ name: k8sName }).passthrough(), spec: z.record(z.string(), z.unknown()) }).passthrough()).default([]),
      /** Nodes by name: their labels and addresses (what a ClusterNetworkPolicy's nodes peer selects). */
      nodes: z.record(k8sName, z.strictObject({ labels: labels.default({}), ips: z.array(ipText).default([]) })).default({}),
    })
    .optional(),
});

/** A DNS-1123 label: a namespace's name. */
const namespaceName = z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a namespace name (a DNS-1123 label)');
/** "namespace/name" of a NetworkAttachmentDefinition, or "name" (then in secondaryNetworks.namespace). */
const definitionRef = z.string().regex(/^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/)?[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be "namespace/name" or "name" of a NetworkAttachmentDefinition');

/** knit in Multus's place (docs/secondary-networks.md, README "Secondary networks"): the networks
 * of a pod's k8s.v1.cni.cncf.io/networks annotation come with its primary interface. Off unless
 * this block is present; its code (and the API client) load only then. */
const secondaryNetworksSchema = z.strictObject({
  /** Kubernetes API access: NetworkAttachmentDefinitions, this node's pods, network-status.
   * Default: $KUBECONFIG, else in-cluster. */
  kubeconfig: absolutePath.optional(),
  /** This node: knit watches the pods scheduled here. Default: $NODE_NAME, else the host name. */
  nodeName: z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a DNS subdomain (a Kubernetes node name)').optional(),
  /** The definitions, literally: "namespace/name" -> its spec.config (text, or the object). With
   * it set knit asks no API: no pod annotations beyond what the runtime passes, no network-status. */
  definitions: z.record(z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be "namespace/name"'),
    z.union([z.string(), z.record(z.string(), z.unknown())])).optional(),
  /** Multus's multusNamespace: where defaultNetworks and the default-network annotation are found. */
  namespace: namespaceName.default('kube-system'),
  /** Networks every pod gets after its primary one, except in systemNamespaces. */
  defaultNetworks: z.array(definitionRef).default([]),
  systemNamespaces: z.array(namespaceName).default(['kube-system']),
  /** A pod may name only definitions of its own namespace and of globalNamespaces. */
  namespaceIsolation: z.boolean().default(false),
  globalNamespaces: z.array(namespaceName).default(['default']),
  /** A definition without config stands for the file here whose "name" is its name (Multus's confDir). */
  confDir: absolutePath.default('/etc/cni/multus/net.d'),
  /** Where the definitions' plugins are found, in order (Multus: binDir, then CNI_PATH). */
  pluginDirs: z.array(absolutePath).min(1).default(['/opt/cni/bin', ...DEFAULT_CNI_PLUGIN_DIRS]),
  /** libcni's result cache for the definitions' chains; knit's alone, under stateDir (default
   * <stateDir>/cni-cache): at start-up knit DELs what is cached there and held by no record,
   * the attachments a reboot (which empties runDir, not the plugins' state) leaves. */
  cacheDir: absolutePath.optional(),
  /** Deadline of one plugin exec. */
  timeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  /** Multus's readinessindicatorfile: ADDs answer "try again later" (11), and STATUS 50, while
   * it does not exist. */
  readinessIndicatorFile: absolutePath.optional(),
  /** How long an ADD waits for the API when a definition or pod is not in knit's informers. */
  lookupTimeoutMs: z.number().int().min(100).max(60_000).default(2_000),
});

export const configSchema = z.strictObject({
  socket: absolutePath.default('/run/knit/knit.sock'),
  /** Sandbox records live here (tmpfs): they describe kernel state that a reboot erases. */
  runDir: absolutePath.default('/run/knit'),
  /** What must survive a reboot (extension registrations). */
  stateDir: absolutePath.default('/var/lib/knit'),
  netnsDir: absolutePath.default('/run/netns'),
  /** Peers (SO_PEERCRED) allowed on the socket. */
  allowedUids: z.array(z.number().int().min(0).max(0xfffffffe)).default([0]),
  /** Prometheus endpoint; off unless set (e.g. "127.0.0.1:9465"). */
  metricsAddress: listenAddress.optional(),
  logLevel: z.enum(LOG_LEVELS).default('info'),
  /** Extensions that must be registered before the node reports ready. */
  requiredExtensions: z.array(z.string().min(1)).default([]),
  /** Where VM launchers ask for their tap fds (SCM_RIGHTS) with the token from Attach. */
  handoffSocket: absolutePath.default('/run/knit/handoff.sock'),
  /** Where knit-cni (the CNI shim runtimes exec) reaches the daemon. */
  cniSocket: absolutePath.default('/run/knit/cni.sock'),
  /** Where knit-cni writes DELs while the daemon is down; drained at start-up. Survives reboots
   * of the daemon, so on persistent storage. */
  cniDeleteQueue: absolutePath.default('/var/lib/knit/cni-delete-queue'),
  /** A queued DEL that fails is retried after backoffMs, doubling, until maxAttempts (the
   * start-up one included); then it moves to cniDeleteQueue/failed and NodeStatus says so. */
  cniDeleteRetry: z
    .strictObject({
      maxAttempts: z.number().int().min(1).max(100).default(6),
      backoffMs: z.number().int().min(10).max(3_600_000).default(5_000),
    })
    .default({}),
  /** At most this many CNI chains (a mode: cni network's, a NetworkAttachmentDefinition's) run at
   * once, ADD or DEL; the rest wait their turn. Bounds the plugin processes of a burst of pod
   * starts, whose memory counts against knit's cgroup (README "Secondary networks"). */
  cniParallelChains: z.number().int().min(1).max(1024).default(8),
  /** Every this many seconds knit detaches the sandboxes whose network namespace is gone
   * (deleted without a Detach or CNI DEL); 0 turns the timer off. Start-up, a pool running dry
   * and a sandbox's host link vanishing sweep too, whatever this says (src/core/gone-netns.ts). */
  goneNetnsSweepSeconds: z.number().int().min(0).max(86_400).default(60),
  /** Network for interfaces that name none. Default: the first network. */
  defaultNetwork: z.string().optional(),
  /** Names this daemon's objects (alias tags "<instance>:...", its reap group). Keep the
   * default unless several daemons share one host, as tests do: each sees only its own. */
  instance: z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'must be 1-32 of a-z, 0-9, "-"').default('knit'),
  /** Where SR-IOV / VFIO / RDMA devices are read and rebound. Only tests point it elsewhere
   * (a simulated tree: this machine has no SR-IOV hardware). */
  sysfsRoot: absolutePath.default('/sys'),
  /** Set when a network spans the cluster (a "node" subnet, crossNode). */
  cluster: clusterSchema.optional(),
  kata: z
    .strictObject({
      /** The only directory knit writes Kata DAN files in (binding.danDir may name one below
       * it): Kata runtime-rs's dan_conf default, DEFDANCONF in src/runtime-rs/Makefile. */
      danDir: absolutePath.default('/run/kata-containers/dans'),
    })
    .default({}),
  /** knit as a Kubernetes DRA driver for NICs (src/dra, README "Devices through DRA"): off
   * unless this block is present, and then loaded only then (a node without it pays nothing). */
  dra: draSchema.optional(),
  /** NetworkPolicy (docs/network-policy.md): off unless present. */
  networkPolicy: networkPolicySchema.optional(),
  secondaryNetworks: secondaryNetworksSchema.optional(),
  // The default goes through the schema, so its own defaults (mtu, routes...) apply.
  networks: z.array(networkSchema).min(1).default(() => [{ name: 'knit0', mode: 'bridge' as const, bridge: 'knit0', ipv4: { subnet: DEFAULT_SUBNET_V4 } }]),
});

export type RawConfig = z.output<typeof configSchema>;
export type RawNetwork = z.output<typeof networkSchema>;
export type RawPool = z.output<typeof poolSchema>;
export type RawCni = z.output<typeof cniSchema>;
export type RawCluster = z.output<typeof clusterSchema>;
export type RawDra = z.output<typeof draSchema>;
export type RawNetworkPolicy = z.output<typeof networkPolicySchema>;
export type RawSecondaryNetworks = z.output<typeof secondaryNetworksSchema>;
