// /proc/sys read-write for knit's own mount namespace (native/src/proc_sys.cc): an unprivileged
// container gets it read-only from its runtime, and knit writes the node's network sysctls.
import { KernelError, type NativeOpError } from './errors.js';
import { native } from './native.js';

/** Remounts /proc/sys read-write when it is mounted read-only; answers whether it did. */
export function makeProcSysWritable(): boolean {
  try {
    return native.procSysMakeWritable() as boolean;
  } catch (err) {
    const e = err as NativeOpError;
    throw new KernelError(`${e.context ?? 'remount /proc/sys'}: ${e.message.split(' during ')[0]}`, { code: e.code ?? 'EIO', errno: e.errno ?? 5, context: e.context, completed: [] });
  }
}
