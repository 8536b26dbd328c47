// Every contender the bench knows, in report order, with the one-character tag used in the
// names of its links and netns.
import type { Contender } from '../lib/contender.js';
import { CniContender } from './cni.js';
import { FloorCContender } from './floor-c.js';
import { FloorIpContender } from './floor-ip.js';
import { GrpcAddonContender } from './grpc-addon.js';
import { GrpcCniContender } from './grpc-cni.js';
import { GrpcBaselineContender } from './grpc-baseline.js';
import { KnitContender } from './knit.js';

/** optIn: run only when --only names it. */
export const CONTENDERS: ReadonlyArray<{ name: string; tag: string; make: () => Contender; optIn?: boolean }> = [
  { name: 'knit', tag: 'k', make: () => new KnitContender() },
  { name: 'knit-c', tag: 'j', make: () => new KnitContender('c-core') },
  { name: 'knit-cni', tag: 'n', make: () => new KnitContender('grpc-js', 'cni') },
  { name: 'knit-shim', tag: 's', make: () => new KnitContender('grpc-js', 'bridge', 'shim') },
  { name: 'knit-v8default', tag: 'v', make: () => new KnitContender('grpc-js', 'bridge', 'rpc', false) },
  // Only with --only knit-alt,... and KNIT_BENCH_ALT_ROOT=<another checkout, built>.
  { name: 'knit-alt', tag: 'x', make: () => new KnitContender('grpc-js', 'bridge', 'rpc', true, process.env.KNIT_BENCH_ALT_ROOT ?? ''), optIn: true },
  { name: 'cni', tag: 'c', make: () => new CniContender() },
  { name: 'floor-c', tag: 'f', make: () => new FloorCContender() },
  { name: 'floor-ip', tag: 'i', make: () => new FloorIpContender() },
  { name: 'grpc', tag: 'g', make: () => new GrpcBaselineContender() },
  { name: 'grpc-c', tag: 'h', make: () => new GrpcBaselineContender('c-core') },
  { name: 'grpc-addon', tag: 'a', make: () => new GrpcAddonContender() },
  { name: 'grpc-addon-v8default', tag: 'd', make: () => new GrpcAddonContender(false) },
  { name: 'grpc-cni', tag: 'b', make: () => new GrpcCniContender() },
];
