// What the kernel announced about links while an action ran (`ip -o monitor link`): each
// device's state at the moment it changed. A later `ip link show` cannot see a state that
// lasted only until the reaper deleted the device; the announcements still show it.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { eventually } from './ns-fixtures.js';

export interface LinkEvent {
  ifindex: number;
  ifname: string;
  flags: string[];
  group?: string;
  deleted: boolean;
  line: string;
}

const EVENT = /^(Deleted )?(\d+): ([^:@\s]+)(?:@\S+)?: <([^>]*)>(.*)$/;

function parseLinkEvent(line: string): LinkEvent | undefined {
  const m = EVENT.exec(line.trim());
  if (!m) return undefined;
  const rest = m[5];
  return {
    ifindex: Number(m[2]),
    ifname: m[3],
    flags: m[4] ? m[4].split(',') : [],
    group: / group (\S+)/.exec(rest)?.[1],
    deleted: !!m[1],
    line,
  };
}

/** True once process `pid` holds a NETLINK_ROUTE socket subscribed to a group: from then on the
 * kernel queues every announcement for it. */
function subscribed(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/net/netlink`, 'utf8').split('\n').slice(1).some((l) => {
      const [, proto, portId, groups] = l.trim().split(/\s+/);
      return proto === '0' && Number(portId) === pid && groups !== undefined && !/^0+$/.test(groups);
    });
  } catch {
    return false;
  }
}

/** Runs `during` with `ip -o monitor link` listening (in netns `ns`, or the host's) and returns
 * every link announcement made meanwhile, in order. The kernel queues its announcements before
 * it answers a request, so once `during` resolves they are on their way to ip: this waits until
 * `until` holds for what ip printed (5 s at most), or without `until` for 100 ms. */
export async function linkEventsDuring(
  during: () => Promise<unknown>,
  { ns, until }: { ns?: string; until?: (events: LinkEvent[]) => boolean } = {},
): Promise<LinkEvent[]> {
  const mon = spawn('ip', [...(ns ? ['-n', ns] : []), '-o', 'monitor', 'link'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  mon.stdout.on('data', (b) => (out += b));
  const exited = new Promise((r) => mon.once('exit', r));
  const events = () => out.split('\n').map(parseLinkEvent).filter((e): e is LinkEvent => !!e);
  try {
    await eventually(() => (subscribed(mon.pid!) || mon.exitCode !== null ? true : undefined), 1000, 5);
    if (mon.exitCode !== null) throw new Error('ip monitor link did not start');
    await during();
    if (!until) await new Promise((r) => setTimeout(r, 100));
    // Not met in time: the caller's assertion shows what was announced.
    else await eventually(() => (until(events()) ? true : undefined), 1000, 5).catch(() => undefined);
  } finally {
    mon.kill();
    await exited;
  }
  return events();
}
