// Follow the config file and apply changes without a restart. The directory is watched, not
// the file: a ConfigMap volume updates by swapping the "..data" symlink, which a watch on the
// old file would never see. Events are debounced (an update is several of them), reloads run
// one at a time, and an invalid new file is reported while the running config stays.

import { readFileSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { sameConfig } from './diff.js';
import { parseConfigText, readConfigFile } from './load.js';
import type { KnitConfig } from './resolve.js';

export interface WatchOptions {
  /** Quiet time before a reload (default 300 ms). */
  debounceMs?: number;
  /** The config in force now; a reload that yields the same config calls nothing. Default:
   * the file's content when the watch starts. */
  initial?: KnitConfig;
}

/** Returns a function that stops watching. onChange may be async; if it throws, the error goes
 * to onError and the next event retries the change. */
export function watchConfig(
  file: string,
  onChange: (config: KnitConfig) => void | Promise<void>,
  onError: (err: Error) => void,
  options: WatchOptions = {},
): () => void {
  const debounceMs = options.debounceMs ?? 300;
  let current = options.initial;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let again = false;

  const reload = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      const next = await readConfigFile(file);
      if (!stopped && !(current && sameConfig(current, next))) {
        await onChange(next);
        current = next;
      }
    } catch (err) {
      if (!stopped) onError(err as Error);
    } finally {
      running = false;
      if (again && !stopped) {
        again = false;
        schedule();
      }
    }
  };

  const schedule = () => {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(() => void reload(), debounceMs);
  };

  let watcher: FSWatcher;
  try {
    watcher = watch(path.dirname(file), schedule);
  } catch (err) {
    onError(err as Error);
    return () => undefined;
  }
  watcher.on('error', (err) => {
    if (!stopped) onError(err);
  });

  if (!current) {
    // Read synchronously, so a change after it is seen by the watch already running.
    try {
      current = parseConfigText(readFileSync(file, 'utf8'), file);
    } catch {
      // Missing or invalid now: the first valid content will count as a change.
    }
  }

  return () => {
    stopped = true;
    clearTimeout(timer);
    watcher.close();
  };
}
