// One fresh process: import the modules named in argv (none: a bare node), let start-up
// garbage settle, then print process.memoryUsage() and /proc/self/status as one JSON line.
// Run by import-costs.mjs; not meant to be run alone.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

for (const spec of process.argv.slice(2)) await import(spec.startsWith('.') ? pathToFileURL(path.resolve(spec)).href : spec);
await new Promise((r) => setTimeout(r, 200));
globalThis.gc?.();
globalThis.gc?.();
await new Promise((r) => setTimeout(r, 100));
const status = readFileSync('/proc/self/status', 'utf8');
const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
const m = process.memoryUsage();
console.log(JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, rssAnon: kb('RssAnon'), rssFile: kb('RssFile') + kb('RssShmem') }));
