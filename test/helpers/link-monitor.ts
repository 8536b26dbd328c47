// What the kernel announced about links while an action ran (`ip -o monitor link`): each
// device's state at the moment it changed. A later `ip link show` cannot see a state that
// lasted only until the reaper deleted the device; the announcements still show it.
//
// The capture is complete, or it fails saying why, whatever the load. The kernel queues each
// announcement for the monitor's socket before it answers the request that caused it, and in
// order: once the action has resolved, a fence (a bridge of the helper's own, added and deleted
// in the watched netns) is announced after everything the action caused, so what ip printed up
// to the fence is all of it, however long ip took to print it (no deadline that a loaded
// machine could outrun). What ip could not read in time is lost instead: when other work in the
// netns (the host's is shared by every test running) fills the socket's buffer, the kernel drops
// announcements (netlink(7), ENOBUFS) and counts them; then the capture throws LinkEventsLost,
// and the caller, who knows how to, repeats the action.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** Not a timing assumption: only how long a hung ip may keep a test waiting. */
const HANG_MS = 120_000;

export interface LinkEvent {
  ifindex: number;
  ifname: string;
  flags: string[];
  group?: string;
  deleted: boolean;
  line: string;
}

/** The kernel dropped announcements meant for the monitor: what it printed is not all. */
export class LinkEventsLost extends Error {
  constructor(readonly dropped: number) {
    super(`the kernel dropped ${dropped} link announcements for ip monitor (its socket's buffer was full): the capture is incomplete`);
    this.name = 'LinkEventsLost';
  }
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

/** Process `pid`'s NETLINK_ROUTE socket subscribed to a group (in /proc/<pid>/net/netlink, which
 * lists the sockets of the netns the process is in): from then on the kernel queues every
 * announcement for it; `drops` counts those it could not (the socket's buffer was full). */
function subscription(pid: number): { drops: number } | undefined {
  try {
    for (const l of readFileSync(`/proc/${pid}/net/netlink`, 'utf8').split('\n').slice(1)) {
      const [, proto, portId, groups, , , , , drops] = l.trim().split(/\s+/);
      if (proto === '0' && Number(portId) === pid && groups !== undefined && !/^0+$/.test(groups)) return { drops: Number(drops) };
    }
  } catch {
    /* the process is gone */
  }
  return undefined;
}

/** How often a capture that lost announcements is taken again (linkEventsDuring's `again`). */
const CAPTURES = 5;

/** Runs `during` with `ip -o monitor link` listening (in netns `ns`, or the host's) and returns
 * every link announcement made meanwhile, in order. Should the kernel drop some: with `again`
 * (what puts things back as `during` expects them), runs it and captures `during` anew, up to
 * CAPTURES times; without, or when every capture lost some, throws LinkEventsLost. */
export async function linkEventsDuring(during: () => Promise<unknown>, o: { ns?: string; again?: () => Promise<unknown> } = {}): Promise<LinkEvent[]> {
  for (let capture = 1; ; capture++) {
    try {
      return await captureDuring(during, o.ns);
    } catch (err) {
      if (!(err instanceof LinkEventsLost) || !o.again || capture === CAPTURES) throw err;
      await o.again();
    }
  }
}

async function captureDuring(during: () => Promise<unknown>, ns: string | undefined): Promise<LinkEvent[]> {
  const inNs = ns ? ['-n', ns] : [];
  // The largest buffer the host allows (net.core.rmem_max caps it): fewer drops in a busy netns.
  const mon = spawn('ip', [...inNs, '-rc', String(64 << 20), '-o', 'monitor', 'link'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  mon.stdout.on('data', (b) => (out += b));
  mon.stderr.on('data', (b) => (err += b));
  const exited = new Promise((r) => mon.once('exit', r));
  const events = () => out.split('\n').map(parseLinkEvent).filter((e): e is LinkEvent => !!e);
  const fence = `kfence${randomBytes(4).toString('hex')}`;
  let fenced = false;
  let dropped = 0;
  try {
    await until(() => !!subscription(mon.pid!), 'ip monitor link to subscribe');
    await during();
    execFileSync('ip', [...inNs, 'link', 'add', fence, 'type', 'bridge']);
    fenced = true;
    // Until ip has printed the fence, or the kernel has dropped something (the fence may be
    // among what it dropped).
    await until(() => events().some((e) => e.ifname === fence) || (dropped = subscription(mon.pid!)?.drops ?? 0) > 0, 'ip monitor link to print the fence');
    dropped = subscription(mon.pid!)?.drops ?? dropped;
  } finally {
    if (fenced) execFileSync('ip', [...inNs, 'link', 'del', fence]);
    mon.kill();
    await exited;
  }
  if (dropped) throw new LinkEventsLost(dropped);
  const all = events();
  return all.slice(0, all.findIndex((e) => e.ifname === fence));

  /** Polls `done` while ip runs; the deadline only turns a hang into an error. */
  async function until(done: () => boolean, what: string): Promise<void> {
    for (const end = Date.now() + HANG_MS; !done(); await new Promise((r) => setTimeout(r, 5))) {
      // ip gives up when its own socket overran: the observer lost events, as knit's may have.
      if (mon.exitCode !== null && /No buffer space/.test(err)) throw new LinkEventsLost(1);
      if (mon.exitCode !== null) throw new Error(`ip monitor link exited (${mon.exitCode}) before ${what}; it printed:\n${out}${err}`);
      if (Date.now() > end) throw new Error(`waited ${HANG_MS / 1000} s for ${what}; it printed:\n${out}`);
    }
  }
}
