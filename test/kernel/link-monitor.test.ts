// The link-announcement capture the kernel tests observe with (test/helpers/link-monitor.ts), on
// a loaded machine at its worst: the `ip monitor` process stopped (SIGSTOP) while things happen.
// What was announced before the action resolved is captured however long ip cannot read; what
// the kernel dropped because ip's socket filled up makes the capture fail, saying so, or, given
// a way to redo the action, be taken again; it never returns less than happened.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { makeNetns, uniquePrefix } from '../helpers/names.js';
import { LinkEventsLost, linkEventsDuring } from '../helpers/link-monitor.js';

/** The PID of the `ip -n <ns> … monitor link` watching netns `ns`. */
function monitorOf(ns: string): number {
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0] === 'ip' && argv.includes(ns) && argv.includes('monitor')) return Number(pid);
    } catch {
      /* gone */
    }
  }
  throw new Error(`no ip monitor for ${ns}`);
}

const ipn = (ns: string, ...args: string[]) => execFileSync('ip', ['-n', ns, ...args]);

/** A SIGTERM waits for process `pid` (stopped, it cannot act on it yet). */
function termPending(pid: number): boolean {
  return [...readFileSync(`/proc/${pid}/status`, 'utf8').matchAll(/^(?:ShdPnd|SigPnd):\s*([0-9a-f]+)$/gm)].some((m) => ((BigInt(`0x${m[1]}`) >> 14n) & 1n) === 1n);
}

test('an announcement made while ip monitor cannot read is captured, however long it cannot', async (t) => {
  const ns = makeNetns(t, uniquePrefix('lmon'), 'a').name;
  let ip = 0;
  // ip reads again only once the capture has done all it does after the action (made its fence
  // device), or is ending ip: as late as a starved process could.
  const resume = setInterval(() => {
    if (!ip) return;
    const fence = (JSON.parse(execFileSync('ip', ['-n', ns, '-j', 'link', 'show'], { encoding: 'utf8' })) as { ifname: string }[]).some((l) => l.ifname.startsWith('kfence'));
    if (fence || termPending(ip)) {
      process.kill(ip, 'SIGCONT');
      clearInterval(resume);
    }
  }, 5);
  t.teardown(() => clearInterval(resume));
  const events = await linkEventsDuring(async () => {
    ip = monitorOf(ns);
    process.kill(ip, 'SIGSTOP');
    ipn(ns, 'link', 'add', 'watched', 'type', 'bridge');
  }, { ns });
  t.deepEqual(events.map((e) => [e.ifname, e.deleted]), [['watched', false]], 'the announcement, and nothing of the fence');
});

test('announcements the kernel dropped make the capture fail saying so, or be taken again when the action can be redone', async (t) => {
  t.timeout(120_000);
  const ns = makeNetns(t, uniquePrefix('lmon'), 'b').name;
  // More announcements than ip's socket can hold (net.core.rmem_max caps it; a link message
  // takes 4 KiB or more of it): a device that is up is announced on each change of its alias.
  const burst = Math.ceil((2 * Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8'))) / 4096) + 200;
  ipn(ns, 'link', 'add', 'noisy', 'type', 'bridge');
  ipn(ns, 'link', 'set', 'noisy', 'up');
  const starvedBurst = async () => {
    const ip = monitorOf(ns);
    process.kill(ip, 'SIGSTOP');
    execFileSync('ip', ['-n', ns, '-batch', '-'], { input: Array.from({ length: burst }, (_, i) => `link set noisy alias a${i}\n`).join('') });
    process.kill(ip, 'SIGCONT');
  };
  const lost = await t.throwsAsync(linkEventsDuring(starvedBurst, { ns }), { instanceOf: LinkEventsLost });
  t.true(lost!.dropped > 0, lost!.message);

  // With a way to put things back, the action is captured again; the second time ip reads.
  let agains = 0;
  let starve = true;
  const events = await linkEventsDuring(async () => {
    if (starve) await starvedBurst();
    else ipn(ns, 'link', 'add', 'calm', 'type', 'bridge');
  }, { ns, again: async () => { agains++; starve = false; } });
  t.is(agains, 1);
  t.deepEqual(events.map((e) => e.ifname), ['calm']);
});
