// The device actions of a plan (src/base/ops.ts DeviceAction), run by src/daemon/host-actions.ts:
// what a device attach needs besides rtnetlink ops — sysfs writes (VFIO), reads that must be
// answered at run time (which netdev a PCI function has now), the PF's VF MAC read-back, and
// RDMA moves. Netlink and sysfs come in through `env`, so this file opens no socket itself and
// tests can hand it a simulated sysfs (test/fixtures/fake-sysfs.ts).
import { KnitError } from '../base/errors.js';
import type { DeviceAction, DeviceReturnAction, LinkInfo, LinkSetOp, Op, OpResult } from '../base/ops.js';
import { findLinkIn } from '../net/find-link.js';
import { rdmaMove, rdmaPresent } from './rdma.js';
import { Sysfs } from './sysfs.js';
import { bindToVfio, restoreFromVfio } from './vfio.js';

export interface DeviceActionEnv {
  /** The sysfs rooted at root ('/sys' unless the config says otherwise). */
  sysfs(root: string): Sysfs;
  /** One netlink batch in netns (undefined: the daemon's own). */
  runOps(netns: string | undefined, ops: Op[]): Promise<OpResult[]>;
}

export const defaultDeviceEnv = (runOps: DeviceActionEnv['runOps']): DeviceActionEnv => ({
  sysfs: (root) => new Sysfs(root),
  runOps,
});

/** sriov-cni's read-back budget: i40e/iavf apply an admin MAC asynchronously. */
const MAC_CHECKS = 20;
const MAC_CHECK_INTERVAL_MS = 100;

const precondition = (message: string) => new KnitError('FAILED_PRECONDITION', message);
const netDir = (bdf: string) => `bus/pci/devices/${bdf}/net`;

/** Runs one device action; `netns` is the step's netns (undefined: the host). */
export async function runDeviceAction(netns: string | undefined, a: DeviceAction, env: DeviceActionEnv): Promise<void> {
  switch (a.op) {
    case 'vfio.bind': {
      const binding = await bindToVfio(env.sysfs(a.sysfsRoot ?? '/sys'), a.pciAddress, {
        beforeChange: (intent) => {
          if (intent.originalDriver !== a.originalDriver) {
            throw precondition(
              `${a.pciAddress} is bound to ${intent.originalDriver ?? 'no driver'}, not ${a.originalDriver ?? 'no driver'} as when the plan was made; not rebinding it`,
            );
          }
        },
      });
      if (binding.iommuGroup !== a.iommuGroup) {
        throw precondition(`${a.pciAddress} is in IOMMU group ${binding.iommuGroup}, not ${a.iommuGroup} as the Attach answer says`);
      }
      return;
    }
    case 'vfio.restore':
      await restoreFromVfio(env.sysfs(a.sysfsRoot ?? '/sys'), a.pciAddress, a.originalDriver);
      return;
    case 'vf.checkMac':
      return checkVfMac(netns, a.link, a.vf, a.mac, env);
    case 'device.claim': {
      const sysfs = env.sysfs(a.sysfsRoot ?? '/sys');
      const names = await sysfs.list(netDir(a.pciAddress));
      if (!names.includes(a.netdev)) {
        throw precondition(
          `${a.pciAddress}: its netdev in the host netns is ${names.length ? names.join(', ') : 'gone'}, not ${a.netdev} as when the plan was made`,
        );
      }
      const link = await findLinkIn(env.runOps, undefined, a.netdev);
      if (!link) throw precondition(`${a.pciAddress}: sysfs lists netdev ${a.netdev}, but the host netns has no such link`);
      await sameDevice(sysfs, a.pciAddress, link);
      return;
    }
    case 'device.return':
      return returnNetdev(a, env);
    case 'rdma.move':
      return rdmaMove(netns, a.device, a.to);
    case 'rdma.present':
      return rdmaPresent(netns, a.device);
  }
}

async function checkVfMac(netns: string | undefined, pf: string | number, vf: number, mac: string, env: DeviceActionEnv): Promise<void> {
  let seen = '(none)';
  for (let i = 0; i < MAC_CHECKS; i++) {
    const [{ link }] = await env.runOps(netns, [{ op: 'link.get', link: pf, vfs: true }]);
    seen = link?.vfs?.find((v) => v.vf === vf)?.mac ?? '(VF not listed)';
    if (seen.toLowerCase() === mac.toLowerCase()) return;
    await new Promise((r) => setTimeout(r, MAC_CHECK_INTERVAL_MS));
  }
  throw new KnitError('INTERNAL', `PF ${pf} VF ${vf}: admin MAC is ${seen} after setting ${mac}; the driver did not apply it`);
}

/**
 * The link found by name is the one sysfs lists under the PCI device: same ifindex. Both come
 * from one kernel object, so they differ only when the name now belongs to someone else.
 */
export async function sameDevice(sysfs: Sysfs, bdf: string, link: LinkInfo): Promise<void> {
  const index = await sysfs.readInt(`${netDir(bdf)}/${link.name}/ifindex`);
  if (index !== undefined && index !== link.index) {
    throw precondition(`${link.name} in the host netns is ifindex ${link.index}, but the netdev ${link.name} of ${bdf} is ifindex ${index}: another device took its name`);
  }
}

/**
 * Give the device's netdev its recorded name, MAC, MTU and up state back. It is found by PCI
 * address, not by name: after its netns died the kernel returned it as dev<ifindex> (a VF is
 * physical, so it is moved to init_net rather than destroyed), and after a driver rebind udev
 * may have named it anew.
 */
async function returnNetdev(a: DeviceReturnAction, env: DeviceActionEnv): Promise<void> {
  const sysfs = env.sysfs(a.sysfsRoot ?? '/sys');
  if (!(await sysfs.exists(`bus/pci/devices/${a.pciAddress}`))) {
    throw new KnitError('NOT_FOUND', `${a.pciAddress} is no longer on this node (VFs disabled?); its netdev ${a.name} cannot be restored`);
  }
  const names = await sysfs.list(netDir(a.pciAddress));
  if (!names.length) {
    throw precondition(
      `${a.pciAddress} has no netdev in the host netns: it is still in a sandbox's netns or its driver has none; ${a.name} cannot be given back yet`,
    );
  }
  const current = names.includes(a.name) ? a.name : names[0]!;
  const link = await findLinkIn(env.runOps, undefined, current);
  if (!link) throw precondition(`${a.pciAddress}: sysfs lists netdev ${current}, but the host netns has no such link`);
  await sameDevice(sysfs, a.pciAddress, link);
  if (current !== a.name && (await findLinkIn(env.runOps, undefined, a.name))) {
    throw precondition(`cannot rename ${current} (${a.pciAddress}) back to ${a.name}: another interface named ${a.name} exists in the host netns`);
  }
  const macDiffers = a.mac !== undefined && link.mac?.toLowerCase() !== a.mac.toLowerCase();
  const mtuDiffers = a.mtu !== undefined && link.mtu !== a.mtu;
  if (current === a.name && !macDiffers && !mtuDiffers && link.up === a.up) return;
  // Down first: a rename (and some drivers' MAC change) needs the link down.
  const restore: LinkSetOp = { op: 'link.set', link: current };
  if (current !== a.name) restore.name = a.name;
  if (macDiffers) restore.mac = a.mac;
  if (mtuDiffers) restore.mtu = a.mtu;
  const ops: Op[] = [{ op: 'link.set', link: current, up: false }];
  if (Object.keys(restore).length > 2) ops.push(restore);
  if (a.up) ops.push({ op: 'link.set', link: a.name, up: true });
  await env.runOps(undefined, ops);
}
