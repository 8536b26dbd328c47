// Stand-ins for SR-IOV VFs (this machine has no SR-IOV NIC): each "VF netdev" is a real veth
// end in the host netns whose peer sits in a test-made "fabric" netns (what the VF's port is
// cabled to), and a simulated sysfs lists it under the VF's PCI address, with its real MAC,
// MTU and ifindex. knit really renames it and moves it into the pod netns and back; only the
// PCI side (sysfs) is simulated. The PF exists only in the simulated sysfs, so requests that
// use stand-ins set no PF-side parameters (those are covered by test/unit/device-strategy*).
//
// One difference from a real VF stays visible: a veth is virtual, so deleting the netns that
// holds it destroys it, where the kernel would return a VF to the host as dev<ifindex>. Tests
// of that path make the dev<ifindex> device themselves (simulateReturnedVf) and say so.
import type { ExecutionContext } from 'ava';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { createFakeSysfs, type FakePciSpec, type FakeSysfs } from '../fixtures/fake-sysfs.js';
import { ipJson, makeNetns, removeLinkQuietly, removeNetns } from '../helpers/daemon.js';

export const PF_BDF = '0000:5a:00.0';
export const vfBdf = (i: number) => `0000:5a:02.${i}`;

export interface StandInVf {
  bdf: string;
  /** Host name of the stand-in VF netdev. */
  name: string;
  /** Its peer, in the fabric netns. */
  peer: string;
  mac: string;
  mtu: number;
  ifindex: number;
}

export interface StandIn {
  node: FakeSysfs;
  /** Netns name of the fabric (the peers live there). */
  fabric: string;
  vfs: StandInVf[];
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** A locally administered MAC unique to (prefix, i). */
function macFor(prefix: string, i: number): string {
  const h = createHash('sha256').update(`${prefix}/${i}`).digest();
  return ['02', ...[...h.subarray(0, 5)].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

/** The host link `name` as `ip -j -d link` shows it, or undefined. */
export function hostLink(name: string): any | undefined {
  try {
    return ipJson(['link', 'show', 'dev', name])[0];
  } catch {
    return undefined;
  }
}

export function linkIn(netns: string, name: string): any | undefined {
  try {
    return ipJson(['link', 'show', 'dev', name], netns)[0];
  } catch {
    return undefined;
  }
}

/** What "put back exactly" compares: name, MAC, MTU, up, ifindex, netns (found in the host). */
export function vfState(name: string) {
  const l = hostLink(name);
  return l && { name: l.ifname, mac: l.address, mtu: l.mtu, up: (l.flags as string[]).includes('UP'), ifindex: l.ifindex };
}

/** Teardown goes through t.teardown; hooks (where ava has none) pass their own registrar. */
export type Cleanup = Pick<ExecutionContext, 'teardown'>;

export async function makeStandIn(t: Cleanup, prefix: string, count = 1): Promise<StandIn> {
  const fabric = `${prefix}-fab`;
  makeNetns(fabric);
  t.teardown(() => removeNetns(fabric));
  const vfs: StandInVf[] = [];
  for (let i = 0; i < count; i++) {
    const vf = { bdf: vfBdf(i), name: `${prefix}vf${i}`, peer: `${prefix}vp${i}`, mac: macFor(prefix, i), mtu: 1400, ifindex: 0 };
    removeLinkQuietly(vf.name); // a leftover of an interrupted run
    t.teardown(() => removeLinkQuietly(vf.name));
    ip('link', 'add', vf.name, 'mtu', String(vf.mtu), 'address', vf.mac, 'type', 'veth', 'peer', 'name', vf.peer, 'mtu', String(vf.mtu), 'netns', fabric);
    ip('link', 'set', vf.name, 'up');
    ip('-n', fabric, 'link', 'set', vf.peer, 'up');
    vf.ifindex = hostLink(vf.name).ifindex;
    vfs.push(vf);
  }
  const specs: FakePciSpec[] = [
    {
      bdf: PF_BDF, classCode: 0x020000, vendor: 0x8086, device: 0x1572, driver: 'i40e', iommuGroup: 70, sriovTotalVfs: 8,
      netdev: { name: `${prefix}pf`, mac: '02:00:00:00:5a:00', mtu: 9000, ifindex: 100000 },
    },
    ...vfs.map((vf, i): FakePciSpec => ({
      bdf: vf.bdf, classCode: 0x020000, vendor: 0x8086, device: 0x154c, driver: 'iavf', iommuGroup: 71 + i,
      physfn: { pf: PF_BDF, index: i }, netdev: { name: vf.name, mac: vf.mac, mtu: vf.mtu, ifindex: vf.ifindex },
    })),
  ];
  const node = await createFakeSysfs(t as ExecutionContext, specs, { rdmaNetnsMode: null });
  return { node, fabric, vfs };
}

/**
 * (simulated dev<ifindex>) What the kernel does to a real VF when its netns dies: it comes back
 * to the host as dev<ifindex>, keeping the MAC and MTU it had in the pod. A veth is destroyed
 * instead, so make a veth with those values, name it dev<its ifindex>, and update sysfs to
 * list it under the VF's PCI address. Returns its name.
 */
export async function simulateReturnedVf(t: Cleanup, s: StandIn, vf: StandInVf, prefix: string, podMac: string, podMtu: number): Promise<string> {
  const tmp = `${prefix}rt`;
  removeLinkQuietly(tmp);
  // Its own peer name: the kernel destroys the old pair asynchronously (netns cleanup runs in
  // a workqueue), so the old peer may still be there.
  ip('link', 'add', tmp, 'mtu', String(podMtu), 'address', podMac, 'type', 'veth', 'peer', 'name', `${prefix}rp`, 'mtu', String(podMtu), 'netns', s.fabric);
  const ifindex: number = hostLink(tmp).ifindex;
  const name = `dev${ifindex}`;
  t.teardown(() => removeLinkQuietly(name));
  ip('link', 'set', tmp, 'name', name);
  await renameInSysfs(s, vf.bdf, vf.name, name, ifindex);
  return name;
}

/** (simulated sysfs) What real sysfs shows after the kernel renamed the PCI device's netdev
 * (and maybe gave it a new ifindex): net/<from> is now net/<to>. */
export async function renameInSysfs(s: StandIn, bdf: string, from: string, to: string, ifindex?: number): Promise<void> {
  const net = s.node.kernel.path(`bus/pci/devices/${bdf}/net`);
  await fs.rename(`${net}/${from}`, `${net}/${to}`);
  if (ifindex !== undefined) await fs.writeFile(`${net}/${to}/ifindex`, `${ifindex}\n`);
  await fs.rename(s.node.kernel.path(`class/net/${from}`), s.node.kernel.path(`class/net/${to}`));
}
