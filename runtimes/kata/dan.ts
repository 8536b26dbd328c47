// Kata's DAN ("directly attachable network") file, <dan_conf>/<sandbox-id>.json: the contract
// by which an outside agent tells the runtime it already made the devices. Field names follow
// runtime-rs (src/runtime-rs/crates/resource/src/network/dan.rs, the side that accepts
// host-tap; the Go runtime accepts only vfio devices). When the file exists Kata uses it
// exclusively and scans no netns.
import type { GuestConfig } from '../../src/base/handoff.js';

/** linux/neighbour.h, linux/rtnetlink.h */
const NUD_PERMANENT = 0x80;
const NUD_REACHABLE = 0x02;
const RTNH_F_ONLINK = 0x4;
const RT_SCOPE_UNIVERSE = 0;
const RT_SCOPE_LINK = 253;

export type DanRoute = { dest: string; gateway: string; source: string; scope: number; flags: number; mtu?: number };
export type DanNeighbor = { ip_address: string; hardware_addr: string; state: number; flags: number };
export type DanDevice = {
  name: string;
  guest_mac: string;
  device: { type: 'host-tap'; tap_name: string; queue_num: number; queue_size: number };
  network_info: {
    interface: { ip_addresses: string[]; mtu: number; flags: number };
    routes: DanRoute[];
    neighbors: DanNeighbor[];
  };
};
/** netns is left out: the devices live in the host netns, which is where runtime-rs looks
 * when the field is absent. */
export type DanConfig = { netns?: string; devices: DanDevice[] };

/** virtio queue size runtime-rs uses when queue_size is 0; written out so the file says it. */
export const DAN_QUEUE_SIZE = 256;

export function danDevice(tapName: string, queues: number, guest: GuestConfig): DanDevice {
  return {
    name: guest.name,
    guest_mac: guest.mac,
    device: { type: 'host-tap', tap_name: tapName, queue_num: queues, queue_size: DAN_QUEUE_SIZE },
    network_info: {
      interface: { ip_addresses: guest.ips.map((ip) => ip.address), mtu: guest.mtu, flags: 0 },
      routes: guest.routes.map((r) => ({
        // The agent's convention: a default route has an empty destination.
        dest: r.dst === '0.0.0.0/0' || r.dst === '::/0' ? '' : r.dst,
        gateway: r.gateway ?? '',
        source: '',
        scope: r.scope === 'link' ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE,
        flags: r.onlink ? RTNH_F_ONLINK : 0,
        ...(r.mtu ? { mtu: r.mtu } : {}),
      })),
      neighbors: guest.neighbors.map((n) => ({
        ip_address: `${n.address}/${n.address.includes(':') ? 128 : 32}`,
        hardware_addr: n.mac,
        state: n.state === 'permanent' ? NUD_PERMANENT : NUD_REACHABLE,
        flags: 0,
      })),
    },
  };
}

/** A PCI function bound to vfio-pci, as the DAN file describes it (runtime-rs dan.rs: {type:
 * "vfio", pci_device_id}); the guest's network config rides along like a tap's. */
export function danVfioDevice(pciAddress: string, guest: GuestConfig): Record<string, unknown> {
  const { name, guest_mac, network_info } = danDevice('', 0, guest);
  return { name, guest_mac, device: { type: 'vfio', pci_device_id: pciAddress }, network_info };
}

export const danPath = (danDir: string, sandboxId: string) => `${danDir === '/' ? '' : danDir}/${sandboxId}.json`;
