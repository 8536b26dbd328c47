// Crash tests: KNIT_FAILPOINT=attach:<n> or detach:<n> makes the daemon kill itself with
// SIGKILL just before step n of every attach (or inverse n of every detach); n equal to the
// step count means "after the last step, before the record says so". cni:<n> kills it inside
// a CNI chain's ADD, just before plugin n runs (after plugins 0..n-1 made their changes).
// Off unless set.
import type { ManagerHooks } from '../core/manager.js';

export function failpointsFromEnv(
  env: NodeJS.ProcessEnv, log: { warn(o: object, m: string): void },
): Pick<ManagerHooks, 'attachFailpoint' | 'detachFailpoint'> & { beforeCniAdd?(n: number): void } {
  const spec = env.KNIT_FAILPOINT;
  if (!spec) return {};
  const m = /^(attach|detach|cni):(\d+)$/.exec(spec);
  if (!m) throw new Error(`KNIT_FAILPOINT: "${spec}" is not attach:<n>, detach:<n> or cni:<n>`);
  const failpoint = {
    index: Number(m[2]),
    fire() {
      log.warn({ failpoint: spec }, 'failpoint reached: SIGKILL');
      process.kill(process.pid, 'SIGKILL');
    },
  };
  if (m[1] === 'cni') return { beforeCniAdd: (n) => n === failpoint.index && failpoint.fire() };
  return m[1] === 'attach' ? { attachFailpoint: failpoint } : { detachFailpoint: failpoint };
}
