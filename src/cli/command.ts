// What every `knit <command>` module provides, and what it gets to run with.
import type { KnitClient } from './client.js';

export interface CliIO {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
}

export type OptionSpec = { type: 'string' | 'boolean'; multiple?: boolean; short?: string };

export interface Context {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
  json: boolean;
  io: CliIO;
  /** Connects on first use (commands that never talk to the daemon never connect). */
  client(): KnitClient;
}

export interface Command {
  name: string;
  summary: string;
  /** Lines after "usage: knit <name> ", e.g. "--id ID --netns PATH [...]". */
  usage: string;
  options: Record<string, OptionSpec>;
  /** Whether the command talks to the daemon (gets --socket/--timeout). */
  remote: boolean;
  run(ctx: Context): Promise<number>;
}

export const str = (ctx: Context, name: string): string | undefined => ctx.values[name] as string | undefined;
export const strs = (ctx: Context, name: string): string[] => (ctx.values[name] as string[] | undefined) ?? [];
