// The PF-side settings of a VF (`ip link set <pf> vf N mac/vlan/spoofchk/trust/rate/state`):
// one vf.set on the PF, whose inverse writes back the values prepare() read for exactly the
// fields it changes, and, when it sets a MAC, a read-back until the driver shows it. These
// steps come first in a plan, so Detach restores the PF side last (after the netdev is back).
import type { Step } from '../../src/base/plan.js';
import { hasPfSettings } from '../../src/devices/params.js';
import { pfApplyOp, pfRestoreOp, type VfOriginalState } from '../../src/devices/netdev-state.js';
import type { PreparedDevice } from './prepared-device.js';

export function pfSideSteps(d: PreparedDevice): Step[] {
  const p = d.ref.parameters;
  if (!hasPfSettings(p)) return [];
  const vf = d.vf;
  if (!vf?.pfName || !vf.pfSide) throw new Error(`${d.pciAddress}: PF-side settings planned without the PF's original state (prepare did not run?)`);
  const state: VfOriginalState = { pciAddress: d.pciAddress, pfPciAddress: vf.pfPciAddress, pfName: vf.pfName, vfIndex: vf.index, pfSide: vf.pfSide };
  const apply = pfApplyOp(state, p)!;
  const steps: Step[] = [
    {
      description: `PF ${vf.pfName}: settings of VF ${vf.index} (${d.pciAddress})`,
      do: apply,
      undo: pfRestoreOp(state, p),
    },
  ];
  if (apply.mac) {
    steps.push({
      description: `PF ${vf.pfName}: VF ${vf.index} reports admin MAC ${apply.mac}`,
      do: { op: 'vf.checkMac', link: vf.pfName, vf: vf.index, mac: apply.mac },
    });
  }
  return steps;
}
