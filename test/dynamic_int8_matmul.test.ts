/**
 * Issue 19 item 3 (rfcs/0006): `attr.setDynamicQuantization(ARG.SRC, dt.s8)` on weight-only s8 / u8 /
 * s4 / u4 matmuls. The reference (dqIntReference, dynamic_int8_runner.ts) models the quantization
 * exactly, independently of src/: each src row to s8 (s = f32(amax / 127), q = round-half-even(x / s) in float64), exact integer sums, then the
 * f32 roundings of the kernels' epilogue in their order — per-column scales: f32(f32(f32(acc) * s_row) *
 * s_col); K-block scales: F = f32(f32(acc_0) * s_0), F = f32(F + f32(f32(acc_b) * s_b)) in block order,
 * then f32(F * s_row); bias last. The kernels must give these bits exactly (no 1-ulp allowance), on
 * SIMD128 and relaxed builds, at 1 and 2 threads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, matmul, memory, reorder, tag } from '../src/index.js';
import { expectDnnlError, expectF32Bits } from './helpers.js';
import { dqEngines, dqIntData, dqIntReference, runDqMatmul, type DqIntCase } from './dynamic_int8_runner.js';

type Case = DqIntCase;

async function run(eng: Engine, strm: Stream, c: Case, seed: number): Promise<{ got: Float32Array; want: Float32Array; impl: string; wmd: string }> {
  const { x, w, sc, bias } = dqIntData(c, seed);
  const o = await runDqMatmul(eng, strm, { ...c, x, w, scales: { data: sc, blk: c.blk }, bias });
  return { ...o, want: dqIntReference(c, x, w, sc, bias) };
}


const SHAPES: [string, Pick<Case, 'E' | 'sizes' | 'K' | 'N'>][] = [
  ['E = 5, a 70-row expert, an empty one, 1-row ones, K = 99, N = 21', { E: 5, sizes: [70, 0, 9, 1, 33], K: 99, N: 21 }],
  ['one expert takes all rows, K = 96, N = 19', { E: 4, sizes: [0, 0, 41, 0], K: 96, N: 19 }],
  ['E = 1, K = 130, N = 13', { E: 1, sizes: [5], K: 130, N: 13 }],
  ['decode: 1 row per expert, K = 256, N = 24', { E: 3, sizes: [1, 1, 1], K: 256, N: 24 }],
];

describe('dynamic int8 activations on weight-only matmuls (attr.setDynamicQuantization)', () => {
  const engines: [string, Engine, Stream][] = [];
  beforeAll(async () => { engines.push(...(await dqEngines())); });
  afterAll(() => engines.forEach(([, e]) => e.release()));

  for (const wdt of [dt.s8, dt.u8, dt.s4, dt.u4]) {
    for (const blk of [0, 32]) {
      it.each(SHAPES)(`${wdt}, ${blk ? `K-blocks of ${blk}` : 'per-column'} scales: %s, exact vs the quantization model`, async (_n, shape) => {
        for (const [name, eng, strm] of engines) {
          for (const proposal of ['P1', 'P2'] as const) {
            // K-blocks need K a multiple of the block: K = 99 and 130 become 128 and 160 there.
            const c: Case = { ...shape, K: blk ? Math.ceil(shape.K / blk) * blk + (shape.K % blk ? blk : 0) : shape.K, wdt, blk, proposal, bias: blk !== 0 };
            const o = await run(eng, strm, c, 7 + blk);
            expect(o.impl).toMatch(/^wasm:(simd128|relaxed):s16-gemm-3x8-w[84]-dq8(\+rd16)?(\+rdot)?$/);
            // the relaxed dot: only when asked for (relaxedDot), never in the SIMD128 build nor on Node 20
            // (relaxed SIMD behind a flag computes it wrong)
            const native = Number(process.versions.node.split('.')[0]) >= 22;
            expect(o.impl.endsWith('+rdot')).toBe(name.startsWith('relaxed+dot') && native && (wdt === dt.s4 || wdt === dt.u4));
            // relaxed SIMD's i16x8 dot (1-2 row tiles of s4 / u4 codes): on every relaxed engine where relaxed SIMD is native
            expect(o.impl.includes('+rd16')).toBe(name.startsWith('relaxed') && native && (wdt === dt.s4 || wdt === dt.u4));
            expect(o.wmd).toContain('+q');
            expectF32Bits(o.got, o.want, `${name} ${proposal}`);
          }
        }
      });
    }
  }

  it('decode-like rows (2-row and 1-row experts), K = 2048', async () => {
    for (const [wdt, blk] of [[dt.s8, 0], [dt.s4, 0], [dt.s4, 32]] as const) {
      for (const [name, eng, strm] of engines) {
        const o = await run(eng, strm, { E: 4, sizes: [2, 1, 0, 2], K: 2048, N: 24, wdt, blk }, 5);
        expectF32Bits(o.got, o.want, `${name} ${wdt} blk ${blk}`);
      }
    }
  });

  it('2-row experts over 259 K blocks: the kernel sums them in batches of 128 blocks, an odd last batch', async () => {
    for (const [name, eng, strm] of engines) {
      const o = await run(eng, strm, { E: 3, sizes: [2, 1, 2], K: 4144, N: 20, wdt: dt.s4, blk: 16 }, 8);
      expectF32Bits(o.got, o.want, `${name} K 4144`);
    }
  });

  it('K-blocks of 16 and 64 with bias, grouped', async () => {
    for (const blk of [16, 64]) {
      for (const [name, eng, strm] of engines) {
        const o = await run(eng, strm, { E: 3, sizes: [4, 0, 67], K: 192, N: 30, wdt: dt.s4, blk, bias: true }, 3);
        expectF32Bits(o.got, o.want, `${name} blk ${blk}`);
      }
    }
  });

  it('refuses what it cannot do, naming the rule', async () => {
    const eng = engines[0][1];
    const srcMd = memory.desc.grouped([8, 64], dt.f32, 2, [RT, 64]), dstMd = memory.desc.grouped([8, 16], dt.f32, 2, [RT, 16]);
    const dq = (): PrimitiveAttr => new PrimitiveAttr().setDynamicQuantization(ARG.SRC);
    expectDnnlError(() => new PrimitiveAttr().setDynamicQuantization(ARG.WEIGHTS), 'invalid_arguments', 'only ARG.SRC');
    expectDnnlError(() => new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.u8), 'unimplemented', 'must be s8');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.f32, tag.any), dstMd, dq()), 'unimplemented', 'weights must be s8, u8, s4, u4 or f4_e2m1');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc.grouped([8, 64], dt.s8, 2, [RT, 64]), memory.desc([2, 64, 16], dt.s8, tag.any), dstMd, dq()), 'invalid_arguments', 'src must be f32, bf16 or f16');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.s8, tag.any), dstMd, dq().setScales(ARG.SRC, 1)), 'invalid_arguments', 'computed by the primitive');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.u8, tag.any), dstMd, dq().setZeroPoints(ARG.WEIGHTS, 5)), 'unimplemented', 'zero points');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc.grouped([8, 63], dt.f32, 2, [RT, 63]), memory.desc([2, 63, 16], dt.s4, tag.any), dstMd, dq().setScales(ARG.WEIGHTS, 7, [1, 3, 1])), 'unimplemented', 'blocks must be even');
    await expect(Engine.create({ threads: 1, relaxedDot: 1 as unknown as boolean })).rejects.toThrow(/relaxedDot must be a boolean/);
    // A NaN in a row: no scale represents it.
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.s8, tag.any), dstMd, dq().setScales(ARG.WEIGHTS, 5));
    const strm = engines[0][2];
    const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    src.offsets.set([0, 4, 8]);
    (src.values as Float32Array).fill(1);
    src.values[3 * 64 + 5] = Number.NaN;
    const wmd = pd.queryMd('weights')!;
    const user = Memory.create(memory.desc([2, 64, 16], dt.s8, tag.abc), eng).write(new Float64Array(2 * 64 * 16).fill(1));
    const scales = Memory.create(pd.queryMd('scales:weights')!, eng).write(new Float32Array(32).fill(1));
    const wei = Memory.create(wmd, eng);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, wmd)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales });
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await expect(strm.wait()).rejects.toThrow(/src row 3 has a NaN/);
  });
});
