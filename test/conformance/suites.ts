// The upstream e2e suites `npm run conformance` runs against knit's cluster
// (test/fixtures/kube-full-cluster.ts), and every spec each one leaves out, with the reason
// (README "Kubernetes conformance" lists the same). Focus and skip are ginkgo regular
// expressions on the spec's full text, as upstream's CI jobs write them.

export interface Skip {
  /** A ginkgo --skip regular expression. */
  pattern: string;
  /** Why the specs it matches cannot or need not run here. */
  reason: string;
}

export interface Suite {
  name: 'conformance' | 'sig-network' | 'netpol';
  title: string;
  focus: string;
  skip: Skip[];
  /** ginkgo processes (--procs): specs of the suite running at once. */
  procs: number;
}

/** Every [sig-network] spec of the Conformance set (45 at v1.34.4), none skipped. */
const conformance: Suite = {
  name: 'conformance',
  title: '[sig-network] [Conformance]',
  focus: String.raw`\[sig-network\].*\[Conformance\]`,
  skip: [],
  procs: 2,
};

/** The [sig-network] specs kind's network CI runs (test-infra sig-network-kind.yaml, its
 * parallel job's selection) that are not Conformance specs, on two nodes. */
const sigNetwork: Suite = {
  name: 'sig-network',
  title: '[sig-network] (kind network CI selection, beyond Conformance)',
  focus: String.raw`\[sig-network\]`,
  skip: [
    { pattern: String.raw`\[Conformance\]`, reason: 'run by the conformance suite' },
    { pattern: String.raw`NetworkPolicy|Netpol`, reason: 'run by the netpol suite' },
    { pattern: String.raw`\[Feature:.+\]`, reason: 'optional features kind\'s CI leaves out too (SCTP, IPv6, dual-stack, NodePort on loopback, example apps, ...)' },
    { pattern: String.raw`\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]`, reason: 'left out by kind\'s parallel network job as well: slow, serial or node-disrupting specs' },
    { pattern: String.raw`LoadBalancer|load.balancer|LB.health.check|GCE`, reason: 'no cloud load balancer or GCE here' },
    { pattern: String.raw`DualStack`, reason: 'the cluster is single-stack IPv4' },
  ],
  procs: 2,
};

/** The NetworkPolicy suite (test/e2e/network/netpol): the dataplane specs, 48 at v1.34.4 (3 of them SCTP). */
const netpol: Suite = {
  name: 'netpol',
  title: 'NetworkPolicy ([Feature:NetworkPolicy])',
  focus: String.raw`\[Feature:NetworkPolicy\]`,
  // The 3 [Feature:SCTPConnectivity] specs run too: this kernel has no SCTP, so the runner
  // imports an agnhost whose SCTP ends are in user space (main.ts, sctpStandIn).
  skip: [],
  procs: 2,
};

export const SUITES: Record<Suite['name'], Suite> = { conformance, 'sig-network': sigNetwork, netpol };

/** The --ginkgo.skip expression of a suite ('' when it skips nothing). */
export function skipExpression(s: Suite): string {
  return s.skip.map((x) => x.pattern).join('|');
}
