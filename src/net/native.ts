// Loads the addon. cmake-js builds it to build/native/Release; node-gyp (the mirror build) to
// build/Release. KNIT_NATIVE overrides the path (the build-equivalence test uses it).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export function addonPath(): string {
  if (process.env.KNIT_NATIVE) return process.env.KNIT_NATIVE;
  const candidates = [
    path.join(root, 'build', 'native', 'Release', 'knit_native.node'),
    path.join(root, 'build', 'Release', 'knit_native.node'),
  ];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`knit native addon not built (looked in ${candidates.join(', ')}): run npm run build`);
  return found;
}

// The addon's raw surface is typed where it is wrapped (handle.ts, netns.ts, ...).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const native: any = require(addonPath());
