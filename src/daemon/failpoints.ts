// Crash tests: KNIT_FAILPOINT=attach:<n> or detach:<n> makes the daemon kill itself with
// SIGKILL just before step n of every attach (or inverse n of every detach); n equal to the
// step count means "after the last step, before the record says so". addif:<n> and
// removeif:<n> do the same for AddInterface's steps and RemoveInterface's inverses. Off
// unless set.
import type { ManagerHooks } from '../core/manager.js';

const HOOKS = {
  attach: 'attachFailpoint',
  detach: 'detachFailpoint',
  addif: 'addInterfaceFailpoint',
  removeif: 'removeInterfaceFailpoint',
} as const;

type FailpointHooks = Pick<ManagerHooks, (typeof HOOKS)[keyof typeof HOOKS]>;

export function failpointsFromEnv(env: NodeJS.ProcessEnv, log: { warn(o: object, m: string): void }): FailpointHooks {
  const spec = env.KNIT_FAILPOINT;
  if (!spec) return {};
  const m = /^(attach|detach|addif|removeif):(\d+)$/.exec(spec);
  if (!m) throw new Error(`KNIT_FAILPOINT: "${spec}" is not attach:<n>, detach:<n>, addif:<n> or removeif:<n>`);
  const failpoint = {
    index: Number(m[2]),
    fire() {
      log.warn({ failpoint: spec }, 'failpoint reached: SIGKILL');
      process.kill(process.pid, 'SIGKILL');
    },
  };
  return { [HOOKS[m[1] as keyof typeof HOOKS]]: failpoint };
}
