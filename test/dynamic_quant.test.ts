import { afterAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, dynamic_quant, memory, offsets, quant, tag } from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { mulberry32, randomF32 } from './workloads.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));

/** Independent float64 model of symmetric per-row int8 quantization. */
function refQuant(x: Float64Array, rows: number, K: number): { q: number[]; s: number[] } {
  const q: number[] = [], s: number[] = [];
  for (let r = 0; r < rows; r++) {
    let amax = 0;
    for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(x[r * K + k]));
    const sc = amax > 0 ? Math.fround(amax / 127) : 1;
    s.push(sc);
    for (let k = 0; k < K; k++) {
      const v = x[r * K + k] / sc;
      const f = Math.floor(v), d = v - f;
      const rne = d > 0.5 ? f + 1 : d < 0.5 ? f : f % 2 === 0 ? f : f + 1;
      q.push(Math.max(-128, Math.min(127, rne)));
    }
  }
  return { q, s };
}

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['simd128 2T', { threads: 2, kernels: 'simd128' }],
  ['relaxed 3T', { threads: 3, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('dynamic_quant [%s]', (_n, opts) => {
  it('matches the float64 model and quant.perTokenInt8, f32 and bf16, tails, zero rows, ties', async () => {
    const eng = await Engine.create(opts);
    engines.push(eng);
    const strm = new Stream(eng);
    for (const [rows, K, t] of [[37, 67, dt.f32], [5, 3, dt.bf16], [1, 1, dt.f32], [9, 128, dt.f16]] as const) {
      const x = randomF32(mulberry32(rows * K), rows * K);
      for (let k = 0; k < K; k++) x[2 % rows * K + k] = 0; // a zero row
      if (K > 2) { x[0] = 127; x[1] = 0.5; x[2] = 1.5; } // exact ties: s = 1
      const srcMd = memory.desc([rows, K], t, tag.ab), dstMd = memory.desc([rows, K], dt.s8, tag.ab);
      const pd = new dynamic_quant.PrimitiveDesc(eng, srcMd, dstMd);
      const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng), sc = Memory.create(pd.queryMd('scales'), eng);
      src.write(x);
      const xs = Float64Array.from(src.read());
      new dynamic_quant.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sc });
      await strm.wait();
      const ref = refQuant(xs, rows, K);
      expect(Array.from(dst.values as Int8Array)).toEqual(ref.q);
      expect(Array.from(sc.values as Float32Array)).toEqual(ref.s);
      const host = quant.perTokenInt8(xs, [rows, K]);
      expect(Array.from(dst.values as Int8Array)).toEqual(Array.from(host.values));
    }
  });
  it('grouped src: only rows up to the last offset; NaN and bad offsets are errors', async () => {
    const eng = await Engine.create(opts);
    engines.push(eng);
    const strm = new Stream(eng);
    const R = 10, K = 8;
    const srcMd = memory.desc.grouped([R, K], dt.f32, 3, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc([R, K], dt.s8, tag.ab);
    const prim = new dynamic_quant.Primitive(new dynamic_quant.PrimitiveDesc(eng, srcMd, dstMd));
    const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng), sc = Memory.create(memory.desc([R], dt.f32, tag.a), eng);
    const x = randomF32(mulberry32(1), R * K);
    x.fill(NaN, 6 * K); // rows past the last offset: never read
    src.write(x);
    offsets.fromSizes([2, 0, 4], src.offsets);
    (dst.values as Int8Array).fill(99);
    const args = { [ARG.SRC]: src, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sc };
    prim.execute(strm, args);
    await strm.wait();
    expect(Array.from(dst.values as Int8Array).slice(0, 6 * K)).toEqual(refQuant(x, 6, K).q);
    expect(Array.from(dst.values as Int8Array).slice(6 * K).every((v) => v === 99)).toBe(true);
    offsets.fromSizes([2, 0, 5], src.offsets);
    prim.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'src row 6 has a NaN');
    src.offsets[3] = 11;
    prim.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'src offsets[3] = 11 must be in [0, 10]');
    expectDnnlError(() => new dynamic_quant.PrimitiveDesc(eng, memory.desc([4, 4], dt.s8, tag.ab), dstMd), 'unimplemented', 'src data type s8');
    expectDnnlError(() => new dynamic_quant.PrimitiveDesc(eng, memory.desc([4, 4], dt.f32, tag.ab), dstMd), 'invalid_arguments', 'dst dims [10,8] must equal src dims [4,4]');
  });
});
