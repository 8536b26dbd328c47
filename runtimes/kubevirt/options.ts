// KubeVirt options in InterfaceRequest.binding: {binding, queues, owner, group, ports}.
//
// The default binding is masquerade. KubeVirt's own compiled-in default for an auto-attached
// pod interface is bridge (pkg/virt-config: DefaultNetworkInterface = "bridge"), but clusters
// may forbid bridge on the pod network (permitBridgeInterfaceOnPodNetwork), KubeVirt's user
// guide recommends masquerade there, and masquerade is the binding that leaves the pod's own
// eth0 and address intact (probes, `knit check`, migration all keep working).
import type { InterfaceInput } from '../../src/base/strategy.js';
import { BindingReader, interfaceIndex } from '../common/binding-options.js';
import { MAX_QUEUES } from '../common/tap.js';

export const KUBEVIRT_BINDINGS = ['tap', 'masquerade', 'bridge'] as const;
export type KubevirtBinding = (typeof KUBEVIRT_BINDINGS)[number];

/** util.NonRootUID: the non-root virt-launcher's uid and gid, which must own the tap. */
export const LAUNCHER_UID = 107;

export interface PortSpec { protocol: 'tcp' | 'udp'; port: number }

export interface KubevirtOptions {
  index: number;
  binding: KubevirtBinding;
  queues: number;
  owner: number;
  group: number;
  /** masquerade: forward only these ports to the guest; empty = forward everything. */
  ports: PortSpec[];
  /** tap: the VMI network whose pod interface another CNI made (KubeVirt's cni-arg
   * logicNetworkName); knit then adds only the tap on it (pod-interface.ts). */
  logicNetwork?: string;
  reader: BindingReader;
}

const MAX_ID = 0xfffffffe; // (uid_t)-1 means "unset" to the kernel

export function kubevirtOptions(input: InterfaceInput): KubevirtOptions {
  const index = interfaceIndex(input);
  const reader = new BindingReader(index, input.iface, ['binding', 'queues', 'owner', 'group', 'ports', 'logicNetwork'], 'kubevirt');
  const binding = reader.oneOf('binding', KUBEVIRT_BINDINGS, 'masquerade');
  if (binding !== 'masquerade' && reader.options.ports !== undefined) {
    throw reader.invalid('ports', 'only applies to binding masquerade');
  }
  const logicNetwork = reader.options.logicNetwork;
  if (logicNetwork !== undefined && (binding !== 'tap' || !logicNetwork)) {
    throw reader.invalid('logicNetwork', binding !== 'tap' ? 'only applies to binding tap' : 'must name the VMI network');
  }
  return {
    index,
    binding,
    queues: reader.int('queues', 1, MAX_QUEUES, 1),
    owner: reader.int('owner', 0, MAX_ID, LAUNCHER_UID),
    group: reader.int('group', 0, MAX_ID, LAUNCHER_UID),
    ports: parsePorts(reader),
    ...(logicNetwork ? { logicNetwork } : {}),
    reader,
  };
}

/** "tcp:80,udp:53" */
function parsePorts(reader: BindingReader): PortSpec[] {
  const text = reader.options.ports;
  if (text === undefined) return [];
  const seen = new Set<string>();
  return text.split(',').map((item) => {
    const m = /^(tcp|udp):(\d{1,5})$/.exec(item.trim());
    const port = m ? Number(m[2]) : 0;
    if (!m || port < 1 || port > 65535) {
      throw reader.invalid('ports', `"${item}" is not protocol:port with protocol tcp or udp and port 1-65535 (e.g. "tcp:80,udp:53")`);
    }
    const key = `${m[1]}:${port}`;
    if (seen.has(key)) throw reader.invalid('ports', `${key} is listed twice`);
    seen.add(key);
    return { protocol: m[1] as PortSpec['protocol'], port };
  });
}
