// `knit <command> [flags]`: parse, dispatch, and turn every failure into one stderr line and
// an exit code (0 ok, 1 usage, 2 not found, 3 invalid argument, 4 unavailable, 5 other
// failure, 6 resource exhausted).
import { parseArgs } from 'node:util';
import { KnitError } from '../base/errors.js';
import { KnitClient, DEFAULT_SOCKET, socketFrom } from './client.js';
import type { CliIO, Command, Context, OptionSpec } from './command.js';
import { CliError, Exit, usageError } from './exit.js';
import { attach, attachIf, plan } from './commands/attach.js';
import { check, detach, detachIf, list, query } from './commands/sandbox.js';
import { gc, status, version, watch } from './commands/node.js';
import { policy } from './commands/policy.js';
import { serveCommand } from './commands/serve.js';
import { installCniCommand, uninstallCniCommand } from './commands/install-cni.js';

export const commands: Command[] = [serveCommand, attach, detach, attachIf, detachIf, query, check, list, status, gc, plan, watch, version, policy, installCniCommand, uninstallCniCommand];

const common: Record<string, OptionSpec> = { help: { type: 'boolean', short: 'h' }, json: { type: 'boolean' } };
const remoteOptions: Record<string, OptionSpec> = { socket: { type: 'string' }, timeout: { type: 'string' } };

export function usage(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    'usage: knit <command> [flags]',
    '',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    `Flags for commands that talk to the daemon: --socket PATH (default $KNIT_SOCKET or ${DEFAULT_SOCKET}),`,
    '--timeout SECONDS (default 60), --json (machine-readable output). knit <command> --help for details.',
    'Exit codes: 0 ok, 1 usage, 2 not found, 3 invalid argument, 4 daemon unavailable, 5 failure, 6 resource exhausted.',
  ].join('\n');
}

function commandUsage(c: Command): string {
  const extra = c.remote ? ' [--socket PATH] [--timeout SECONDS]' : '';
  return `usage: knit ${c.name} ${c.usage}${extra} [--json]\n${c.summary}`;
}

/** node:util parseArgs errors, shortened to what the user typed wrong. */
function parseArgsMessage(err: NodeJS.ErrnoException): string {
  const flag = /'([^']+)'/.exec(err.message)?.[1];
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown flag ${flag ?? ''}`.trim();
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return err.message.replace(/^Option '(--\S+)(?: <value>)?'.*argument missing$/, '$1 needs a value');
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${flag ?? ''}`.trim();
    default:
      return err.message;
  }
}

const oneLine = (s: string) => s.replace(/\s*\n\s*/g, ' ').trim();

export const processIO: CliIO = {
  out: (t) => process.stdout.write(`${t}\n`),
  err: (t) => process.stderr.write(`${t}\n`),
  env: process.env,
};

export async function run(argv: string[], io: CliIO = processIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.err(`knit: missing command (one of ${commands.map((c) => c.name).join(', ')}; knit help for details)`);
    return Exit.usage;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    io.out(usage());
    return Exit.ok;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    io.err(`knit: unknown command "${name}" (commands: ${commands.map((c) => c.name).join(', ')})`);
    return Exit.usage;
  }

  let client: KnitClient | undefined;
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args: rest,
        options: { ...common, ...(command.remote ? remoteOptions : {}), ...command.options },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw usageError(parseArgsMessage(err as NodeJS.ErrnoException));
    }
    const { values, positionals } = parsed;
    if (values.help) {
      io.out(commandUsage(command));
      return Exit.ok;
    }
    const timeoutText = values.timeout as string | undefined;
    const timeoutSeconds = timeoutText === undefined ? 60 : Number(timeoutText);
    if (!(timeoutSeconds > 0)) throw usageError(`--timeout ${timeoutText}: expected a positive number of seconds`);
    const ctx: Context = {
      values: values as Context['values'],
      positionals,
      json: Boolean(values.json),
      io,
      client: () => (client ??= new KnitClient(socketFrom(values.socket as string | undefined, io.env), timeoutSeconds * 1000)),
    };
    return await command.run(ctx);
  } catch (err) {
    if (err instanceof CliError) {
      const hint = err.exitCode === Exit.usage ? ` (knit ${name} --help)` : '';
      io.err(`knit ${name}: ${oneLine(err.message)}${hint}`);
      return err.exitCode;
    }
    if (err instanceof KnitError) {
      // From code that ran in-process (serve): same mapping as a daemon answer.
      const code = err.code === 'NOT_FOUND' ? Exit.notFound : err.code === 'INVALID_ARGUMENT' ? Exit.invalidArgument : Exit.failure;
      io.err(`knit ${name}: ${oneLine(err.message)}`);
      return code;
    }
    io.err(`knit ${name}: ${oneLine(err instanceof Error ? err.message : String(err))}`);
    return Exit.failure;
  } finally {
    client?.close();
  }
}
