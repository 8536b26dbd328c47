// Compiles knit-floor.c with the system cc into build/bench/floor/ when the binary is missing
// or older than the source; the bench is the only user, so it is built at bench time.
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { exec } from '../lib/exec.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const FLOOR_SOURCE = path.join(repoRoot, 'bench', 'floor', 'knit-floor.c');
export const FLOOR_BINARY = path.join(repoRoot, 'build', 'bench', 'floor', 'knit-floor');

export async function buildFloor(): Promise<string> {
  if (!existsSync(FLOOR_SOURCE)) throw new Error(`knit-floor source missing: ${FLOOR_SOURCE}`);
  if (existsSync(FLOOR_BINARY) && statSync(FLOOR_BINARY).mtimeMs >= statSync(FLOOR_SOURCE).mtimeMs) return FLOOR_BINARY;
  mkdirSync(path.dirname(FLOOR_BINARY), { recursive: true });
  await exec('cc', ['-O2', '-Wall', '-Wextra', '-pthread', '-o', FLOOR_BINARY, FLOOR_SOURCE]);
  return FLOOR_BINARY;
}
