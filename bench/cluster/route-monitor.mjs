// When a route appeared in (or left) a netns, as the kernel announced it: `ip -ts monitor route`
// in that netns, one line per RTM_NEWROUTE / RTM_DELROUTE, stamped by ip with the wall clock
// (local time, microseconds) when it read the message. The independent observer of both agents.
import { execFileSync, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const LINE = /^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})(\d*)\] (Deleted )?(.*)$/;
/** Route types ip prints before the destination ("blackhole 10.0.0.0/24"). */
const TYPES = new Set(['unicast', 'local', 'broadcast', 'multicast', 'throw', 'unreachable', 'prohibit', 'blackhole', 'nat', 'anycast']);
const word = (rest, key) => new RegExp(`\\b${key} (\\S+)`).exec(rest)?.[1];

/** Starts the monitor; ready() resolves once it has seen a probe route come and go (so no event
 * of the bench can precede it). stop() ends it by PID. */
export function routeMonitor(ns) {
  const child = spawn('ip', ['-n', ns, '-ts', 'monitor', 'route'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const events = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = LINE.exec(line);
    if (!m) return;
    // Date.parse reads an ISO time without a zone as local time, as ip printed it.
    const t = Date.parse(m[1]) + Number(`0.${m[2] || '0'}`);
    const words = m[4].split(' ');
    const type = TYPES.has(words[0]) ? words.shift() : 'unicast';
    // ip leaves out "proto boot" (what a route added without a protocol carries, as flannel's).
    events.push({ t, deleted: Boolean(m[3]), type, dst: words[0], via: word(m[4], 'via'), dev: word(m[4], 'dev'), proto: word(m[4], 'proto') ?? 'boot' });
  });
  return {
    events,
    async ready() {
      const probe = '198.51.100.0/24'; // TEST-NET-2: nobody's route
      for (let i = 0; i < 200; i++) {
        execFileSync('ip', ['-n', ns, 'route', 'add', 'blackhole', probe]);
        execFileSync('ip', ['-n', ns, 'route', 'del', 'blackhole', probe]);
        await new Promise((r) => setTimeout(r, 50));
        if (events.some((e) => e.dst === probe)) return;
      }
      throw new Error(`ip monitor in ${ns} printed nothing`);
    },
    stop() {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

/** Waits until `keyOf(event)` has named each key once since events[from], or the deadline;
 * answers key → time of the first match, plus how many never came. `check` throws to stop
 * waiting (the agent died). */
export async function firstEvents(mon, from, keys, keyOf, timeoutMs, check = () => {}) {
  const seen = new Map();
  let i = from;
  const end = Date.now() + timeoutMs;
  const wanted = new Set(keys);
  for (;;) {
    for (; i < mon.events.length; i++) {
      const e = mon.events[i];
      const k = keyOf(e);
      if (k !== undefined && wanted.has(k) && !seen.has(k)) seen.set(k, e.t);
    }
    if (seen.size === wanted.size || Date.now() > end) return { seen, missing: wanted.size - seen.size };
    check();
    await new Promise((r) => setTimeout(r, 50));
  }
}
