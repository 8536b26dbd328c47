// Crash tests: KNIT_FAILPOINT=attach:<n> or detach:<n> makes the daemon kill itself with
// SIGKILL just before step n of every attach (or inverse n of every detach); n equal to the
// step count means "after the last step, before the record says so". addif:<n> and
// removeif:<n> do the same for AddInterface's steps and RemoveInterface's inverses. cni:<n>
// kills it inside a CNI chain's ADD, just before plugin n runs (after plugins 0..n-1 made
// their changes). draprepare:<n> kills it just before step n of every DRA claim's Prepare (n
// equal to the step count: all ran, the record still says preparing; a claim with no step is
// recorded prepared at once, and draprepare:0 kills it after that write). Off unless set.
import type { ManagerHooks } from '../core/ports.js';
import type { Failpoint } from '../core/executor.js';

const HOOKS = {
  attach: 'attachFailpoint',
  detach: 'detachFailpoint',
  addif: 'addInterfaceFailpoint',
  removeif: 'removeInterfaceFailpoint',
} as const;

type FailpointHooks = Pick<ManagerHooks, (typeof HOOKS)[keyof typeof HOOKS]> & { beforeCniAdd?(n: number): void; draPrepareFailpoint?: Failpoint };

export function failpointsFromEnv(env: NodeJS.ProcessEnv, log: { warn(o: object, m: string): void }): FailpointHooks {
  const spec = env.KNIT_FAILPOINT;
  if (!spec) return {};
  const m = /^(attach|detach|addif|removeif|cni|draprepare):(\d+)$/.exec(spec);
  if (!m) throw new Error(`KNIT_FAILPOINT: "${spec}" is not attach:<n>, detach:<n>, addif:<n>, removeif:<n>, cni:<n> or draprepare:<n>`);
  const failpoint = {
    index: Number(m[2]),
    fire() {
      log.warn({ failpoint: spec }, 'failpoint reached: SIGKILL');
      process.kill(process.pid, 'SIGKILL');
    },
  };
  if (m[1] === 'cni') return { beforeCniAdd: (n) => n === failpoint.index && failpoint.fire() };
  if (m[1] === 'draprepare') return { draPrepareFailpoint: failpoint };
  return { [HOOKS[m[1] as keyof typeof HOOKS]]: failpoint };
}
