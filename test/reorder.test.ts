import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, dt, memory, reorder, tag, type DataType } from '../src/index.js';
import { ENGINE_CONFIGS, expectDnnlError, readLogical, writeLogical } from './helpers.js';
import { mulberry32 } from './workloads.js';

/** Values every type holds exactly (so a copy must reproduce them bit for bit). */
function exactValues(t: DataType, n: number, seed: number): Float64Array {
  const rng = mulberry32(seed);
  const pick: Record<string, readonly number[]> = {
    s8: [-128, -7, 0, 5, 127], u8: [0, 3, 200, 255], s4: [-8, -3, 0, 1, 7], u4: [0, 2, 9, 15], s32: [-70000, -1, 0, 123456],
    f8_e4m3: [-448, -0.5, 0, 0.125, 3], f8_e5m2: [-57344, -1, 0, 0.25, 6], f4_e2m1: [-6, -1.5, 0, 0.5, 4], e8m0: [0.25, 1, 2, 1024],
    f32: [-1.5, 0, 3.25, 0.125], bf16: [-2, 0, 0.5, 96], f16: [-0.25, 0, 7, 1024],
  };
  const p = pick[t];
  return Float64Array.from({ length: n }, () => p[Math.floor(rng() * p.length)]);
}

describe.each(ENGINE_CONFIGS)('reorder [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  // Odd element counts so 4-bit types end on a half byte.
  it.each(['s8', 'u8', 's4', 'u4', 's32', 'f8_e4m3', 'f8_e5m2', 'f4_e2m1', 'e8m0', 'f32', 'bf16', 'f16'] as const)(
    '%s: abc -> acb -> abc keeps every value (odd sizes)', async (t) => {
      const dims = [3, 5, 7];
      const a = Memory.create(memory.desc(dims, t, tag.abc), eng), b = Memory.create(memory.desc(dims, t, tag.acb), eng);
      const c = Memory.create(memory.desc(dims, t, tag.abc), eng);
      const v = exactValues(t, 3 * 5 * 7, 9);
      writeLogical(a, v);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, a.desc, b.desc)).execute(strm, { [ARG.FROM]: a, [ARG.TO]: b });
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, b.desc, c.desc)).execute(strm, { [ARG.FROM]: b, [ARG.TO]: c });
      await strm.wait();
      expect(readLogical(b)).toEqual(v);
      expect(readLogical(c)).toEqual(v);
      [a, b, c].forEach((m) => m.free());
    },
  );

  it('a type change outside f32 / bf16 / f16 is unimplemented, and says which types work', () => {
    expectDnnlError(() => new reorder.PrimitiveDesc(eng, memory.desc([4, 4], dt.s8, tag.ab), memory.desc([4, 4], dt.f32, tag.ab)), 'unimplemented', 'reorder: s8 -> f32 is not supported (same type, or between f32, bf16, f16)');
  });
});
