// sysctls of the handle's netns (/proc/sys/net is per namespace).
import type { NetHandle } from './handle.js';

export async function getSysctl(h: NetHandle, key: string): Promise<string> {
  const [r] = await h.run([{ op: 'sysctl.get', key }]);
  return r.value ?? '';
}

export async function setSysctl(h: NetHandle, key: string, value: string): Promise<void> {
  await h.run([{ op: 'sysctl.set', key, value }]);
}
