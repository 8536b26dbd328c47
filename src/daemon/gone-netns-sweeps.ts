// When knit looks for sandboxes whose netns is gone (src/core/gone-netns.ts does the looking,
// the manager the detaching): every goneNetnsSweepSeconds, and at once when a sandbox's host
// link vanishes. A veth's host end dies with the namespace its peer was in, so that is a prompt
// to look, never proof: the sweep still asks whether the namespace exists.
export interface GoneNetnsSweeps {
  /** A sandbox's host link vanished: sweep now. */
  prompt(): void;
  /** A netns file knit holds a socket in (a KubeVirt guest's DHCP responder) was removed: the
   * socket keeps that namespace, so no link of it vanishes; sweep now. */
  promptFileGone(): void;
  stop(): void;
}

export function scheduleGoneNetnsSweeps(o: {
  sweep(trigger: string): Promise<string[]>;
  /** Read at every tick, so a config reload changes it; 0 is off. */
  intervalSeconds(): number;
  log: { warn(o: object, m: string): void };
}): GoneNetnsSweeps {
  const run = (trigger: string) => {
    o.sweep(trigger).catch((err: Error) => o.log.warn({ trigger, err: err.message }, 'gone-netns sweep failed'));
  };
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    // Off (0) still looks once a minute whether a reload turned it on.
    timer = setTimeout(tick, (o.intervalSeconds() || 60) * 1000);
    timer.unref();
  };
  const tick = () => {
    if (o.intervalSeconds() > 0) run('timer');
    schedule();
  };
  schedule();
  return {
    prompt: () => run('link-gone'),
    promptFileGone: () => run('netns-file-gone'),
    stop: () => clearTimeout(timer),
  };
}
