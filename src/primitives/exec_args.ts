import { DnnlError, check } from '../common/status.js';
import { checkPackedFilled } from '../memory/packed_fill.js';
import { RUNTIME_SIZE_VAL, type MemoryDesc } from '../memory/desc.js';
import { Memory } from '../memory/memory.js';
import type { Engine } from '../runtime/engine.js';
import { argName } from './args.js';

export type ExecArgs = Readonly<Record<number, Memory | undefined>>;

/** An execution argument checked against the pd's descriptor (messages built only on failure). */
export function memArg(fn: string, engine: Engine, args: ExecArgs, id: number, md: MemoryDesc): Memory {
  const m = args[id];
  const name = argName(id);
  if (m === undefined) throw new DnnlError('invalid_arguments', `${fn}: missing argument ${name}`);
  check(m instanceof Memory, `${fn}: ${name} must be a Memory object`);
  check(!m.isFreed, `${fn}: ${name} was freed`);
  check(m.engine === engine, `${fn}: ${name} belongs to another engine`);
  if (!m.desc.equals(md)) check(false, `${fn}: ${name} descriptor ${m.desc} does not match the primitive's ${md}`);
  m.handles.forEach((h, i) => {
    const n = m.desc.getSize(i);
    if (engine.heap.owningBlock(h, n === RUNTIME_SIZE_VAL ? 0 : n) === undefined) check(false, `${fn}: ${name} buffer ${i} is no longer a live allocation of the engine`);
  });
  checkPackedFilled(fn, name, m);
  return m;
}

/** Throws unless an argument the pd does not take is absent. */
export function noArg(fn: string, args: ExecArgs, id: number, why: string): void {
  check(args[id] === undefined, `${fn}: ${argName(id)} was given but ${why}`);
}

/** Rejects outputs whose values overlap any other argument's values. */
export function checkNoOverlap(fn: string, outs: readonly [Memory | undefined, number][], all: readonly [Memory | undefined, number][]): void {
  const span = (m: Memory): [number, number] => [m.handles[0], m.handles[0] + Math.max(0, m.desc.getSize(0))];
  for (const [o, oid] of outs) {
    if (!o) continue;
    const [a0, a1] = span(o);
    for (const [m, id] of all) {
      if (!m || m === o) continue;
      const [b0, b1] = span(m);
      if (a0 < b1 && b0 < a1) check(false, `${fn}: ${argName(oid)} values overlap ${argName(id)} values`);
    }
  }
}
