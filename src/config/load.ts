// Reading the config: file text -> positions + value -> schema -> cross-field checks ->
// resolved config. Every problem is reported as "file:line: key.path: what is wrong", all of
// them at once, so one edit-reload cycle fixes a whole file.

import { readFile } from 'node:fs/promises';
import { KnitError, CniCode } from '../base/errors.js';
import { crossCheck, type ConfigIssue } from './checks.js';
import { ConfigSyntaxError, formatKeyPath, parseConfigText as parseText } from './config-text.js';
import { resolveConfig, type KnitConfig } from './resolve.js';
import { configSchema } from './schema.js';
import { fromZodIssues } from './zod-issues.js';
import { refuseInsecure } from './permissions.js';

export interface LocatedIssue {
  /** Key path such as networks[0].ipv4.subnet ("" for the whole document). */
  path: string;
  line?: number;
  message: string;
}

export class ConfigError extends KnitError {
  constructor(readonly source: string, readonly issues: LocatedIssue[]) {
    super('INVALID_ARGUMENT', issues.map((i) => formatIssue(source, i)).join('\n'), {
      field: issues[0]?.path || undefined,
      cniCode: CniCode.invalidConfig,
    });
    this.name = 'ConfigError';
  }
}

function formatIssue(source: string, issue: LocatedIssue): string {
  const where = issue.line === undefined ? source : `${source}:${issue.line}`;
  return `${where}: ${issue.path ? `${issue.path}: ` : ''}${issue.message}`;
}

export interface LoadedConfig {
  config: KnitConfig;
  /** Where the config came from; with a path that does not exist, the embedded default. */
  source: 'file' | 'embedded default';
  path?: string;
}

/** The config used when there is no file: every default, one bridge network "knit0". */
export function defaultConfig(): KnitConfig {
  return validateConfig({}, 'embedded default');
}

/** Validate an already-parsed value (no line numbers to give). */
export function validateConfig(value: unknown, source = 'config'): KnitConfig {
  return check(value, source, () => undefined);
}

/** Parse (YAML 1.2, so JSON too) and validate config file text; errors carry line numbers. */
export function parseConfigText(text: string, source = 'config'): KnitConfig {
  let parsed;
  try {
    parsed = parseText(text);
  } catch (err) {
    if (!(err instanceof ConfigSyntaxError)) throw err;
    throw new ConfigError(source, [{ path: '', line: err.line, message: `syntax error at column ${err.column}: ${err.reason}` }]);
  }
  return check(parsed.value, source, (path) => parsed.lineOf(path));
}

/** Read the file at path; without a path, or when the file does not exist, the default. */
export async function loadConfig(path: string | undefined): Promise<LoadedConfig> {
  if (path === undefined) return { config: defaultConfig(), source: 'embedded default' };
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { config: defaultConfig(), source: 'embedded default', path };
    throw new ConfigError(path, [{ path: '', message: `cannot read: ${(err as Error).message}` }]);
  }
  refuseInsecure('config', path);
  return { config: parseConfigText(text, path), source: 'file', path };
}

/** Like loadConfig, but a missing file is an error (a reload must not fall back to defaults). */
export async function readConfigFile(path: string): Promise<KnitConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(path, [{ path: '', message: `cannot read: ${(err as Error).message}` }]);
  }
  refuseInsecure('config', path);
  return parseConfigText(text, path);
}

function check(value: unknown, source: string, lineFor: (path: readonly PropertyKey[]) => number | undefined): KnitConfig {
  // In file order (stable sort: issues on one line keep their order); unplaced ones last.
  const locate = (issues: ConfigIssue[]): LocatedIssue[] =>
    issues
      .map((i) => ({ path: formatKeyPath(i.path), line: lineFor(i.path), message: i.message }))
      .sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
  const parsed = configSchema.safeParse(value);
  if (!parsed.success) throw new ConfigError(source, locate(fromZodIssues(parsed.error.issues, value)));
  const problems = crossCheck(parsed.data);
  if (problems.length) throw new ConfigError(source, locate(problems));
  return resolveConfig(parsed.data);
}
