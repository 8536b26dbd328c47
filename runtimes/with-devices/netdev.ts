// netdev mode: the device's netdev (an SR-IOV VF, or any PCI NIC) leaves the host for the
// sandbox, as dranet and sriov-cni do it
// (kubernetes-sigs/dranet, k8snetworkplumbingwg/sriov-cni):
//
//   PF side       vf.set on the PF (+ MAC read-back)      undo: vf.set with the recorded values
//   claim         its netdev is still <host name>         undo: device.return (find it by PCI
//                                                           address, rename, MAC, MTU, up)
//   move          rename + move in one request            (its inverse is the next step's)
//   arrived       <pod name> is in the sandbox            undo: rename + MAC + MTU + move back
//   configure     MAC, MTU, addresses, up, routes         (gone with the move back: a netns
//                                                           move flushes addresses and routes)
//   RDMA          exclusive mode: move the RDMA device    undo: move it back
//
// Detach runs the inverses in reverse: RDMA first, then the netdev, then the PF side. The
// move back happens from inside the sandbox; when the sandbox netns is already gone those
// inverses are skipped and the kernel has returned the VF to the host as dev<ifindex>, which
// device.return finds by PCI address and renames. Every value an inverse writes was read by
// prepare() before the first change and is in the journal with the plan.
import type { Step } from '../../src/base/plan.js';
import type { DeviceClaimAction, DeviceReturnAction, LinkSetOp } from '../../src/base/ops.js';
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { draDevice, rdmaHandoff } from './handoff.js';
import { deviceL3 } from './l3.js';
import { pfSideSteps } from './pf-side.js';
import { podName } from './prepare.js';
import type { PreparedDevice } from './prepared-device.js';

/** The daemon's own netns, as the addon opens it when it sends the request. */
export const HOST_NETNS = '/proc/self/ns/net';

const withRoot = <T extends object>(a: T, d: PreparedDevice): T => (d.sysfsRoot === '/sys' ? a : { ...a, sysfsRoot: d.sysfsRoot });

/** The step that pins "this PCI device has this netdev" and whose inverse gives it back. */
export function claimStep(d: PreparedDevice): Step {
  const n = d.netdev!;
  const claim: DeviceClaimAction = withRoot({ op: 'device.claim', pciAddress: d.pciAddress, netdev: n.name }, d);
  const ret: DeviceReturnAction = withRoot(
    { op: 'device.return', pciAddress: d.pciAddress, name: n.name, ...(n.mac ? { mac: n.mac } : {}), mtu: n.mtu, up: n.up },
    d,
  );
  return { description: `claim ${n.name} (PCI ${d.pciAddress}); its inverse finds it by PCI address and restores it`, do: claim, undo: ret };
}

export function planNetdev(input: InterfaceInput, d: PreparedDevice): InterfacePlan {
  const ns = input.netnsPath;
  const p = d.ref.parameters;
  const orig = d.netdev!;
  const name = podName(input, d.ref);
  const mac = p.mac ?? input.iface.mac;
  const mtu = p.mtu ?? input.iface.mtu;

  const back: LinkSetOp = { op: 'link.set', link: name, name: orig.name, mtu: orig.mtu, netns: HOST_NETNS };
  if (orig.mac) back.mac = orig.mac;
  const steps: Step[] = [
    ...pfSideSteps(d),
    claimStep(d),
    { description: `move ${orig.name} into the sandbox as ${name}`, do: { op: 'link.set', link: orig.name, name, netns: ns } },
    { description: `${name} is in the sandbox; its inverse moves it back as ${orig.name}`, netns: ns, do: { op: 'link.get', link: name }, undo: back },
  ];
  if (mac !== undefined || mtu !== undefined) {
    const set: LinkSetOp = { op: 'link.set', link: name };
    if (mac !== undefined) set.mac = mac;
    if (mtu !== undefined) set.mtu = mtu;
    steps.push({ description: `${[mac && `MAC ${mac}`, mtu && `MTU ${mtu}`].filter(Boolean).join(', ')} on ${name}`, netns: ns, do: set });
  }
  const l3 = deviceL3(input, d, name);
  steps.push(...l3.addressSteps, { description: `bring up ${name}`, netns: ns, do: { op: 'link.set', link: name, up: true } }, ...l3.routeSteps);

  // Shared mode: the RDMA device is visible in every netns; only the char devices go along.
  const moveRdma = d.rdma !== undefined && d.rdma.netnsMode === 'exclusive';
  if (moveRdma) {
    const dev = d.rdma!.device;
    steps.push(
      { description: `move RDMA device ${dev} into the sandbox`, do: { op: 'rdma.move', device: dev, to: ns } },
      { description: `RDMA device ${dev} is in the sandbox; its inverse moves it back`, netns: ns, do: { op: 'rdma.present', device: dev }, undo: { op: 'rdma.move', device: dev } },
    );
  }

  const hardwareAddress = mac ?? orig.mac ?? '';
  const rdma = rdmaHandoff(d, moveRdma);
  return {
    steps,
    interfaces: [
      {
        name,
        kind: d.kind === 'vf' ? 'vf' : 'netdev',
        mac: hardwareAddress || undefined,
        mtu: mtu ?? orig.mtu,
        sandbox: ns,
        pciId: d.pciAddress,
        handoff: {
          model: 'netdev',
          pciAddress: d.pciAddress,
          hostInterfaceName: orig.name,
          draDevice: draDevice(d),
          networkData: { interfaceName: name, ips: l3.ips.map((ip) => ip.address), hardwareAddress },
          ...(rdma ? { rdma } : {}),
        },
      },
    ],
    ips: l3.ips,
    routes: l3.routes,
  };
}
