// Crash tests: KNIT_FAILPOINT=attach:<n> or detach:<n> makes the daemon kill itself with
// SIGKILL just before step n of every attach (or inverse n of every detach); n equal to the
// step count means "after the last step, before the record says so". addif:<n> and
// removeif:<n> do the same for AddInterface's steps and RemoveInterface's inverses. cni:<n>
// kills it inside a CNI chain's ADD, just before plugin n runs (after plugins 0..n-1 made
// their changes). Off unless set.
import type { ManagerHooks } from '../core/ports.js';

const HOOKS = {
  attach: 'attachFailpoint',
  detach: 'detachFailpoint',
  addif: 'addInterfaceFailpoint',
  removeif: 'removeInterfaceFailpoint',
} as const;

type FailpointHooks = Pick<ManagerHooks, (typeof HOOKS)[keyof typeof HOOKS]> & { beforeCniAdd?(n: number): void };

export function failpointsFromEnv(env: NodeJS.ProcessEnv, log: { warn(o: object, m: string): void }): FailpointHooks {
  const spec = env.KNIT_FAILPOINT;
  if (!spec) return {};
  const m = /^(attach|detach|addif|removeif|cni):(\d+)$/.exec(spec);
  if (!m) throw new Error(`KNIT_FAILPOINT: "${spec}" is not attach:<n>, detach:<n>, addif:<n>, removeif:<n> or cni:<n>`);
  const failpoint = {
    index: Number(m[2]),
    fire() {
      log.warn({ failpoint: spec }, 'failpoint reached: SIGKILL');
      process.kill(process.pid, 'SIGKILL');
    },
  };
  if (m[1] === 'cni') return { beforeCniAdd: (n) => n === failpoint.index && failpoint.fire() };
  return { [HOOKS[m[1] as keyof typeof HOOKS]]: failpoint };
}
