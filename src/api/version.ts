// Versions knit reports (Version RPC, `knit version`). Kept apart from the handlers so the CLI
// can read them without loading the server side.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** knit's own version, from package.json. */
export function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** The KNI POC API version served next to knit.v1 (proto/kni/api.proto). */
export const KNI_VERSION = 'v0.0.8';
