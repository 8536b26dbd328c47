// `knit serve`: run the daemon in the foreground (wiring in src/daemon/serve.ts).
import type { Command } from '../command.js';
import { usageError } from '../exit.js';

export const serveCommand: Command = {
  name: 'serve',
  summary: 'run the knit daemon in the foreground',
  usage: '[--config FILE]',
  options: { config: { type: 'string' } },
  remote: false,
  async run(ctx) {
    if (ctx.positionals.length) throw usageError(`unexpected argument "${ctx.positionals[0]}"`);
    // Loaded on demand: client commands must not pull in the daemon (and the native addon).
    const { serve } = await import('../../daemon/serve.js');
    try {
      await serve({ config: ctx.values.config as string | undefined });
    } catch (err) {
      // A start-up step that fails after a listener opened (the API socket is up, the hand-off
      // socket is refused) would leave the process serving half a daemon: exit once the error
      // is reported, with the code run() gives it.
      setTimeout(() => process.exit(), 100);
      throw err;
    }
    return 0;
  },
};
