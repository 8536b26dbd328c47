// Route reads.
import type { RouteInfo } from '../base/ops.js';
import type { NetHandle } from './handle.js';

/** Routes of one table (default: main), optionally of one family. Cached clones excluded. */
export async function listRoutes(h: NetHandle, opts: { family?: 4 | 6; table?: number } = {}): Promise<RouteInfo[]> {
  const [r] = await h.run([{ op: 'route.list', ...opts }]);
  return r.routes ?? [];
}
