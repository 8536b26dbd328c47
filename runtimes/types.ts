// The contract between core and a runtime strategy: core hands over one interface of one
// sandbox with its addresses already allocated; the strategy answers with the steps that
// build it and the result a launcher or kubelet needs. Strategies compute; they never run.
import type { AttachRequest, InterfaceRequest, ResultInterface, ResultRoute, RuntimeKind } from '../src/core/types.js';
import type { Step } from '../src/core/plan.js';

export interface NetworkSpec {
  name: string;
  mode: 'bridge' | 'routed';
  /** Linux bridge name (bridge mode). */
  bridge?: string;
  mtu: number;
  hairpin: boolean;
  ipv4?: { subnet: string; gateway: string };
  ipv6?: { subnet: string; gateway: string };
  routes: { dst: string; gw?: string }[];
}

export interface Allocation {
  family: 4 | 6;
  /** bare address, no prefix */
  address: string;
  prefixLen: number;
  gateway?: string;
}

export interface InterfaceInput {
  sandboxId: string;
  netnsPath: string;
  request: AttachRequest;
  iface: InterfaceRequest;
  network: NetworkSpec;
  addresses: Allocation[];
}

export interface PlannedIp {
  address: string; // CIDR
  gateway?: string;
  family: 4 | 6;
  /** index into InterfacePlan.interfaces */
  interface: number;
}

export interface InterfacePlan {
  steps: Step[];
  interfaces: ResultInterface[];
  ips: PlannedIp[];
  routes: ResultRoute[];
}

export interface Strategy {
  runtime: RuntimeKind;
  planInterface(input: InterfaceInput): InterfacePlan;
}
