#!/usr/bin/env node
// What a V8 heap snapshot holds, grouped: self size and count by node type and constructor
// name, largest first. Usage: node bench/memory/snapshot-summary.mjs FILE.heapsnapshot [top=25]
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
const snap = JSON.parse(readFileSync(file, 'utf8'));
const { node_fields: fields, node_types: [types] } = snap.snapshot.meta;
const width = fields.length;
const at = (f) => fields.indexOf(f);
const [iType, iName, iSize] = [at('type'), at('name'), at('self_size')];
const groups = new Map();
let total = 0;
for (let i = 0; i < snap.nodes.length; i += width) {
  const type = types[snap.nodes[i + iType]];
  const name = type === 'object' || type === 'closure' || type === 'native' ? snap.strings[snap.nodes[i + iName]] : '';
  const key = `${type}${name ? ` ${name.slice(0, 60)}` : ''}`;
  const size = snap.nodes[i + iSize];
  total += size;
  const g = groups.get(key) ?? { count: 0, size: 0 };
  g.count++;
  g.size += size;
  groups.set(key, g);
}
const MiB = (b) => (b / 1048576).toFixed(2);
console.log(`${file}: ${snap.nodes.length / width} nodes, ${MiB(total)} MiB self size`);
for (const [key, g] of [...groups].sort((a, b) => b[1].size - a[1].size).slice(0, Number(topArg ?? 25))) {
  console.log(`${MiB(g.size).padStart(8)} MiB ${String(g.count).padStart(8)}  ${key}`);
}
