import { DnnlError, check } from '../common/status.js';
import { GpuMemory } from '../memory/gpu_memory.js';
import type { MemoryDesc } from '../memory/desc.js';
import type { Memory } from '../memory/memory.js';
import type { GpuEngine } from '../runtime/gpu/gpu_engine.js';
import { argName } from './args.js';

/** Execution arguments of a primitive that runs on either engine kind. */
export type AnyExecArgs = Readonly<Record<number, Memory | GpuMemory | undefined>>;

/**
 * `memArg` (exec_args.ts) for a gpu engine: the same checks and messages, on a `GpuMemory` (there is
 * no heap to look a handle up in: a freed memory says so itself).
 */
export function gpuMemArg(fn: string, engine: GpuEngine, args: AnyExecArgs, id: number, md: MemoryDesc): GpuMemory {
  const m = args[id];
  const name = argName(id);
  if (m === undefined) throw new DnnlError('invalid_arguments', `${fn}: missing argument ${name}`);
  if (!(m instanceof GpuMemory)) check(false, `${fn}: ${name} must be a Memory object of the gpu engine`);
  if (m.isFreed) check(false, `${fn}: ${name} was freed`);
  if (m.engine !== engine) check(false, `${fn}: ${name} belongs to another engine`);
  if (!m.desc.equals(md)) check(false, `${fn}: ${name} descriptor ${m.desc} does not match the primitive's ${md}`);
  if (!m.filled) check(false, `${fn}: ${name} is a packed layout that was never filled: fill it with reorder`);
  return m;
}

/**
 * `checkNoOverlap` for gpu memory: WebGPU cannot bind one buffer for writing and for reading in one
 * dispatch, so an output may share no buffer with another argument.
 */
export function gpuCheckNoOverlap(fn: string, outs: readonly [GpuMemory | undefined, number][], all: readonly [GpuMemory | undefined, number][]): void {
  for (const [o, oid] of outs) {
    if (!o) continue;
    for (const [m, id] of all) {
      if (!m || id === oid) continue;
      if (m.buffers.some((b) => b === o.buffers[0])) check(false, `${fn}: ${argName(oid)} values overlap ${argName(id)} values`);
    }
  }
}
