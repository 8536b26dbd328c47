// `knit install-cni` / `knit uninstall-cni` (src/cni-frontend/install.ts). Defaults come from
// the daemon's config (--config), so the conflist names the socket the daemon listens on.
import type { Command, Context } from '../command.js';
import { str } from '../command.js';
import { usageError } from '../exit.js';

const dirOptions = {
  'bin-dir': { type: 'string' },
  'conf-dir': { type: 'string' },
  name: { type: 'string' },
} as const;

function dirs(ctx: Context) {
  if (ctx.positionals.length) throw usageError(`unexpected argument "${ctx.positionals[0]}"`);
  return {
    binDir: str(ctx, 'bin-dir') ?? '/opt/cni/bin',
    confDir: str(ctx, 'conf-dir') ?? '/etc/cni/net.d',
    fileName: str(ctx, 'name') ?? '10-knit.conflist',
  };
}

export const installCniCommand: Command = {
  name: 'install-cni',
  summary: 'install knit-cni and a conflist so container runtimes use knit through CNI',
  usage: '[--bin-dir DIR] [--conf-dir DIR] [--name FILE] [--network NAME] [--cni-network NAME] [--socket PATH] [--config FILE]',
  options: { ...dirOptions, network: { type: 'string' }, 'cni-network': { type: 'string' }, socket: { type: 'string' }, config: { type: 'string' } },
  remote: false,
  async run(ctx) {
    const where = dirs(ctx);
    const { loadConfig } = await import('../../config/index.js');
    const { config } = await loadConfig(str(ctx, 'config'));
    const { installCni, installRecordPath } = await import('../../cni-frontend/install.js');
    const done = await installCni({
      ...where,
      network: str(ctx, 'network') ?? '',
      networkName: str(ctx, 'cni-network') ?? 'knit',
      socket: str(ctx, 'socket') ?? config.cniSocket,
      deleteQueue: config.cniDeleteQueue,
      record: installRecordPath(config.stateDir),
    });
    ctx.io.out(ctx.json ? JSON.stringify(done) : `installed ${done.shim} and ${done.conflist}`);
    return 0;
  },
};

export const uninstallCniCommand: Command = {
  name: 'uninstall-cni',
  summary: 'remove the knit-cni and conflist that install-cni wrote (nothing else)',
  usage: '[--bin-dir DIR] [--conf-dir DIR] [--name FILE] [--config FILE]',
  options: { ...dirOptions, config: { type: 'string' } },
  remote: false,
  async run(ctx) {
    const where = dirs(ctx);
    const { loadConfig } = await import('../../config/index.js');
    const { config } = await loadConfig(str(ctx, 'config'));
    const { uninstallCni, installRecordPath } = await import('../../cni-frontend/install.js');
    const removed = await uninstallCni({ ...where, record: installRecordPath(config.stateDir) });
    ctx.io.out(ctx.json ? JSON.stringify({ removed }) : removed.length ? `removed ${removed.join(' ')}` : 'nothing of knit to remove');
    return 0;
  },
};
