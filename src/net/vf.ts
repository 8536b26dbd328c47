// SR-IOV VF state as the PF reports it.
import type { LinkRef, VfInfo } from '../base/ops.js';
import type { NetHandle } from './handle.js';

/** The PF's VFs (empty for a link without SR-IOV). */
export async function listVfs(h: NetHandle, pf: LinkRef): Promise<VfInfo[]> {
  const [r] = await h.run([{ op: 'link.get', link: pf, vfs: true }]);
  return r.link?.vfs ?? [];
}
