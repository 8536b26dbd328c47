// Kata options in InterfaceRequest.binding: {mode, queues, danDir}.
import type { InterfaceInput } from '../../src/base/strategy.js';
import { BindingReader, interfaceIndex } from '../common/binding-options.js';
import { MAX_QUEUES } from '../common/tap.js';

export const KATA_MODES = ['tcfilter', 'macvtap', 'host-tap'] as const;
export type KataMode = (typeof KATA_MODES)[number];

/** Kata's dan_conf default (DEFDANCONF in runtime-rs's Makefile), and knit's kata.danDir
 * default. binding.danDir may name a directory below the configured one, never elsewhere:
 * knit writes as root, and a request must not choose where. */
export const DEFAULT_DAN_DIR = '/run/kata-containers/dans';

export interface KataOptions {
  index: number;
  /** N of tap<N>_kata: the interface's device slot (InterfaceInput.slot), else its index. */
  slot: number;
  /** Default tcfilter: Kata's default internetworking_model for QEMU, CLH, FC. */
  mode: KataMode;
  /** Queue pairs; Kata uses the VM's vCPU count, which knit cannot see: say it here. */
  queues: number;
  danDir: string;
  /** The configured directory danDir lies in (InterfaceInput.danDir). */
  danRoot: string;
}

export function kataOptions(input: InterfaceInput): KataOptions {
  const index = interfaceIndex(input);
  const reader = new BindingReader(index, input.iface, ['mode', 'queues', 'danDir'], 'kata');
  const mode = reader.oneOf('mode', KATA_MODES, 'tcfilter');
  if (mode !== 'host-tap' && reader.options.danDir !== undefined) {
    throw reader.invalid('danDir', 'only applies to mode host-tap');
  }
  const danRoot = input.danDir ?? DEFAULT_DAN_DIR;
  return {
    index,
    slot: input.slot ?? index,
    mode,
    queues: reader.int('queues', 1, MAX_QUEUES, 1),
    danDir: reader.dirWithin('danDir', danRoot, 'the directory knit writes Kata DAN files in (config kata.danDir)'),
    danRoot,
  };
}
