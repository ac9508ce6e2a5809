import { DnnlError, check } from '../common/status.js';
import { checkPackedFilled } from '../memory/packed_fill.js';
import { RUNTIME_SIZE_VAL, type MemoryDesc } from '../memory/desc.js';
import { Memory } from '../memory/memory.js';
import { GpuMemory } from '../memory/gpu_memory.js';
import type { Engine } from '../runtime/engine.js';
import type { GpuEngine } from '../runtime/gpu/gpu_engine.js';
import { argName } from './args.js';

/** Memory objects of either engine kind (a cpu pd takes `Memory`, a gpu pd `GpuMemory`). */
export type AnyMemory = Memory | GpuMemory;
export type ExecArgs = Readonly<Record<number, AnyMemory | undefined>>;

/**
 * An execution argument checked against the pd's descriptor (messages built only on failure). The
 * memory must belong to `engine`, so a cpu engine always gets a `Memory` and a gpu engine a `GpuMemory`.
 */
export function memArg(fn: string, engine: Engine, args: ExecArgs, id: number, md: MemoryDesc): Memory;
export function memArg(fn: string, engine: GpuEngine, args: ExecArgs, id: number, md: MemoryDesc): GpuMemory;
export function memArg(fn: string, engine: Engine | GpuEngine, args: ExecArgs, id: number, md: MemoryDesc): AnyMemory;
export function memArg(fn: string, engine: Engine | GpuEngine, args: ExecArgs, id: number, md: MemoryDesc): AnyMemory {
  const m = args[id];
  const name = argName(id);
  if (m === undefined) throw new DnnlError('invalid_arguments', `${fn}: missing argument ${name}`);
  // Messages built only on failure: this runs for every argument of every execute.
  if (!(m instanceof Memory || m instanceof GpuMemory)) check(false, `${fn}: ${name} must be a Memory object`);
  if (m.isFreed) check(false, `${fn}: ${name} was freed`);
  if (m.engine !== engine) check(false, `${fn}: ${name} belongs to another engine`);
  if (!m.desc.equals(md)) check(false, `${fn}: ${name} descriptor ${m.desc} does not match the primitive's ${md}`);
  if (m instanceof GpuMemory) {
    if (!m.filled) check(false, `${fn}: ${name} is a packed layout that was never filled: fill it with reorder`);
    return m;
  }
  const heap = (engine as Engine).heap;
  m.handles.forEach((h, i) => {
    const n = m.desc.getSize(i);
    if (heap.owningBlock(h, n === RUNTIME_SIZE_VAL ? 0 : n) === undefined) check(false, `${fn}: ${name} buffer ${i} is no longer a live allocation of the engine`);
  });
  checkPackedFilled(fn, name, m);
  return m;
}

/** Throws unless an argument the pd does not take is absent. */
export function noArg(fn: string, args: ExecArgs, id: number, why: string): void {
  if (args[id] !== undefined) check(false, `${fn}: ${argName(id)} was given but ${why}`);
}

/**
 * Rejects outputs whose values overlap any other argument's values. On the gpu engine two memories
 * overlap when they share the values buffer (a buffer bound for writing cannot be bound again).
 */
export function checkNoOverlap(fn: string, outs: readonly [AnyMemory | undefined, number][], all: readonly [AnyMemory | undefined, number][]): void {
  const span = (m: Memory): [number, number] => [m.handles[0], m.handles[0] + Math.max(0, m.desc.getSize(0))];
  const overlap = (a: AnyMemory, b: AnyMemory): boolean => {
    if (a instanceof GpuMemory || b instanceof GpuMemory) return a.handles[0] === b.handles[0];
    const [a0, a1] = span(a), [b0, b1] = span(b);
    return a0 < b1 && b0 < a1;
  };
  for (const [o, oid] of outs) {
    if (!o) continue;
    for (const [m, id] of all) {
      // The same argument is no overlap; the same object under two ids is (an output bound as an input too).
      if (!m || id === oid) continue;
      if (overlap(o, m)) check(false, `${fn}: ${argName(oid)} values overlap ${argName(id)} values`);
    }
  }
}
