/**
 * Dynamic int8 activations (`attr.setDynamicQuantization(ARG.SRC, dt.s8)`, rfcs/0006) on f4_e2m1 weights:
 * MXFP4 (e8m0 scales per 32 K), NVFP4 (f8_e4m3 scales per 16 K), per-column f32 scales and no scales. The
 * integer kernels take every e2m1 value v as the exact integer 2 v (in [-12, 12]) and put the 0.5 into the
 * weights scales (a power of two: exact). The reference models that independently of src/: each src row
 * to s8 (s = f32(amax / 127), q = round-half-even(x / s) in float64), exact integer sums of q x 2 v, then
 * the epilogue's f32 roundings in their order (dqReference, dynamic_int8_runner.ts) with the scale s' = 0.5 s:
 * per-column f32(f32(f32(acc) * s_row) * s'_col); K blocks F = f32(f32(acc_0) * s'_0), F = f32(F +
 * f32(f32(acc_b) * s'_b)), then f32(F * s_row); bias last. Bits must match exactly on SIMD128 and relaxed
 * builds (with and without the relaxed dot), at 1 and 2 threads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, matmul, memory, tag, type DataType } from '../src/index.js';
import { expectDnnlError, expectF32Bits } from './helpers.js';
import { mulberry32 } from './workloads.js';
import { dqEngines, dqReference, runDqMatmul } from './dynamic_int8_runner.js';

const f32 = Math.fround;
/** The e2m1 values of codes 0..15 (code 8 is -0). */
const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];

/** The weights scales: MXFP4 / NVFP4 K blocks, per-column f32, or none. */
type Scheme = 'mxfp4' | 'nvfp4' | 'col' | 'none';
const SCHEME: Record<Scheme, { blk: number; sdt?: DataType }> = {
  mxfp4: { blk: 32, sdt: dt.e8m0 }, nvfp4: { blk: 16, sdt: dt.f8_e4m3 }, col: { blk: 0, sdt: dt.f32 }, none: { blk: 0 },
};
/** How the weights reach the matmul: tag.any (`x4:p8k2+q`, scales embedded unless none), the codes-only
 * panels with execute-time scales, or plain (tag.abc) with execute-time scales (per-column only: K blocks
 * need packed weights). */
type Form = 'any' | 'codes' | 'plain';

interface Case {
  readonly E: number;
  readonly sizes: readonly number[];
  readonly K: number;
  readonly N: number;
  readonly scheme: Scheme;
  readonly form?: Form;
  readonly bias?: boolean;
  readonly proposal?: 'P1' | 'P2';
  /** s4 weights (codes 0..15 as -8..7) on the same scale schemes: the staged K-block scales serve them too. */
  readonly s4?: boolean;
  /** Every third K-block scale at the bottom of its type: e8m0 2^-127 .. 2^-124 (0x00 .. 0x03), f8_e4m3 subnormals m 2^-9. */
  readonly tinyScales?: boolean;
}

/** A weight code's value: e2m1, or (s4) code - 8. */
const codeValue = (c: Case, q: number): number => (c.s4 ? q - 8 : E2M1[q]);

/** A scale value its type holds exactly: e8m0 powers of two, e4m3 normals (1 + m / 8) 2^e, f32. */
function scaleValue(r: () => number, sdt: DataType | undefined): number {
  if (sdt === dt.e8m0) return 2 ** -(4 + Math.floor(r() * 8));
  if (sdt === dt.f8_e4m3) return (1 + Math.floor(r() * 8) / 8) * 2 ** -(2 + Math.floor(r() * 5)); // normals: 2^-6 and up
  return f32(0.001 + r() * 0.02);
}

/** dqReference with the kernels' integers: 2 v for e2m1, with its 0.5 in the scale; the value for s4. */
function reference(c: Case, x: Float32Array, codes: Uint8Array, sc: Float32Array, bias: Float32Array | undefined): Float32Array {
  const { K, N } = c, { blk } = SCHEME[c.scheme], nb = blk ? Math.ceil(K / blk) : 1;
  const half = c.s4 ? 1 : 0.5;
  return dqReference({ ...c, blk }, x, (g, k, n) => codeValue(c, codes[(g * K + k) * N + n]) / half,
    (g, b, n) => (c.scheme === 'none' ? half : half * sc[(g * nb + b) * N + n]), bias);
}

async function run(eng: Engine, strm: Stream, c: Case, seed: number): Promise<{ got: Float32Array; want: Float32Array; impl: string; wmd: string }> {
  const { E, K, N } = c, T = c.sizes.reduce((a, b) => a + b, 0), { blk, sdt } = SCHEME[c.scheme];
  const r = mulberry32(seed);
  const x = Float32Array.from({ length: T * K }, () => (r() * 2 - 1) * (r() < 0.05 ? 40 : 1));
  if (T > 1) x.fill(0, K, 2 * K); // a row of zeros: scale 1
  const codes = Uint8Array.from({ length: E * K * N }, (_, i) => (i < 16 ? i : Math.floor(r() * 16))); // all 16 codes
  const nb = blk ? Math.ceil(K / blk) : 1;
  const sc = Float32Array.from({ length: E * nb * N }, () => scaleValue(r, sdt));
  // e8m0 codes 0x00 (2^-127, an f32 subnormal) and 0x01 (2^-126: times 0.5 a subnormal): the staging's slow lane
  if (sdt === dt.e8m0) sc.set([2 ** -127, 2 ** -126]);
  if (c.tinyScales) for (let i = 2; i < sc.length; i += 3) sc[i] = sdt === dt.e8m0 ? 2 ** (-127 + (i % 4)) : (1 + (i % 7)) * 2 ** -9;
  const bias = c.bias ? Float32Array.from({ length: E * N }, () => f32(r() - 0.5)) : undefined;
  const o = await runDqMatmul(eng, strm, {
    ...c, x, w: Float64Array.from(codes, (q) => codeValue(c, q)), wdt: c.s4 ? dt.s4 : dt.f4_e2m1,
    scales: sdt ? { data: sc, blk, sdt } : undefined, bias,
  });
  return { ...o, want: reference(c, x, codes, sc, bias) };
}


/** K is rounded up to the scheme's block where it has one (K blocks must divide K); N % 8 != 0 in most. */
const SHAPES: [string, Pick<Case, 'E' | 'sizes' | 'K' | 'N'>][] = [
  ['E = 5, a 70-row expert, an empty one, 1-row ones, K = 99, N = 21', { E: 5, sizes: [70, 0, 9, 1, 33], K: 99, N: 21 }],
  ['one expert takes all rows, K = 96, N = 19', { E: 4, sizes: [0, 0, 41, 0], K: 96, N: 19 }],
  ['E = 1, M = 5, K = 130, N = 13', { E: 1, sizes: [5], K: 130, N: 13 }],
  ['decode: M = 1 per expert, K = 256, N = 24', { E: 3, sizes: [1, 1, 1], K: 256, N: 24 }],
  ['M = 2 and 3, K = 144, N = 40', { E: 3, sizes: [2, 3, 0], K: 144, N: 40 }],
];

describe('dynamic int8 activations on f4_e2m1 weights (MXFP4 / NVFP4 :dq)', () => {
  const engines: [string, Engine, Stream][] = [];
  beforeAll(async () => { engines.push(...(await dqEngines())); });
  afterAll(() => engines.forEach(([, e]) => e.release()));

  for (const scheme of ['mxfp4', 'nvfp4', 'col', 'none'] as const) {
    it.each(SHAPES)(`${scheme}: %s, exact vs the quantization model`, async (_n, shape) => {
      const { blk } = SCHEME[scheme];
      for (const [name, eng, strm] of engines) {
        for (const proposal of ['P1', 'P2'] as const) {
          const c: Case = { ...shape, K: blk ? Math.ceil(shape.K / blk) * blk : shape.K, scheme, proposal, bias: proposal === 'P2' };
          const o = await run(eng, strm, c, 11 + blk);
          expect(o.impl).toMatch(/^wasm:(simd128|relaxed):s16-gemm-3x8-wf4-dq8(\+rd16)?(\+rdot)?$/);
          // the relaxed dot runs fp4 too: only when asked for, and where relaxed SIMD is native (Node 22+)
          expect(o.impl.endsWith('+rdot')).toBe(name.startsWith('relaxed+dot') && Number(process.versions.node.split('.')[0]) >= 22);
          // relaxed SIMD's i16x8 dot on the 1-2 row tiles: every relaxed engine where relaxed SIMD is native
          expect(o.impl.includes('+rd16')).toBe(name.startsWith('relaxed') && Number(process.versions.node.split('.')[0]) >= 22);
          if (scheme !== 'none') expect(o.wmd).toContain('+q');
          expectF32Bits(o.got, o.want, `${name} ${proposal}`);
        }
      }
    });
  }

  it('execute-time scales: codes-only panels (MXFP4, NVFP4, per-column) and plain weights (per-column, none)', async () => {
    const cases: [Scheme, Form][] = [['mxfp4', 'codes'], ['nvfp4', 'codes'], ['col', 'codes'], ['col', 'plain'], ['none', 'plain']];
    for (const [scheme, form] of cases) {
      for (const [name, eng, strm] of engines) {
        const K = scheme === 'col' || scheme === 'none' ? 75 : 160;
        const o = await run(eng, strm, { E: 4, sizes: [1, 0, 2, 23], K, N: 27, scheme, form }, 21);
        expect(o.wmd).not.toContain('+q');
        expectF32Bits(o.got, o.want, `${name} ${scheme} ${form}`);
      }
    }
  });

  it('s4 weights with e8m0 / f8_e4m3 K-block scales, embedded and at execution (the staged scales of the 1-row kernels)', async () => {
    for (const scheme of ['mxfp4', 'nvfp4'] as const) {
      for (const form of ['any', 'codes'] as const) {
        for (const [name, eng, strm] of engines) {
          const o = await run(eng, strm, { E: 3, sizes: [1, 2, 9], K: 320, N: 27, scheme, form, s4: true }, 23);
          expect(o.impl).toMatch(/s16-gemm-3x8-w4-dq8/);
          expectF32Bits(o.got, o.want, `${name} s4 ${scheme} ${form}`);
        }
      }
    }
  });

  it('decode-like rows (1- and 2-row experts), K = 2048, and a tall expert', async () => {
    for (const scheme of ['mxfp4', 'nvfp4', 'col'] as const) {
      for (const [name, eng, strm] of engines) {
        const o = await run(eng, strm, { E: 4, sizes: [2, 1, 0, 1], K: 2048, N: 40, scheme }, 5);
        expectF32Bits(o.got, o.want, `${name} ${scheme} decode`);
        const t = await run(eng, strm, { E: 2, sizes: [130, 3], K: 576, N: 24, scheme }, 6);
        expectF32Bits(t.got, t.want, `${name} ${scheme} tall`);
        if (scheme !== 'nvfp4') continue;
        // 2-row experts over 259 blocks: the kernel sums them in batches of 128, an odd last batch (1-byte scales two at a time)
        const b = await run(eng, strm, { E: 3, sizes: [2, 1, 2], K: 4144, N: 20, scheme }, 7);
        expectF32Bits(b.got, b.want, `${name} ${scheme} 259 blocks`);
      }
    }
  });

  it('1-row experts read the 1-byte block scales beside the panels: e8m0 0x00-0x03 and f8_e4m3 subnormals, odd block counts', async () => {
    for (const scheme of ['mxfp4', 'nvfp4'] as const) {
      for (const [name, eng, strm] of engines) {
        // K = 7 blocks (an odd count: the last block's scales alone), 2 panels and an odd last one (N = 20)
        const K = 7 * SCHEME[scheme].blk;
        const o = await run(eng, strm, { E: 3, sizes: [1, 1, 2], K, N: 20, scheme, tinyScales: true }, 31);
        expectF32Bits(o.got, o.want, `${name} ${scheme} tiny scales`);
      }
    }
  });

  it('1 and 2 threads give the same bits', async () => {
    for (const scheme of ['mxfp4', 'nvfp4'] as const) {
      for (const kernels of ['simd128', 'relaxed+dot'] as const) {
        const outs = [];
        for (const [name, eng, strm] of engines.filter(([n]) => n.startsWith(kernels))) {
          outs.push((await run(eng, strm, { E: 3, sizes: [1, 40, 2], K: 512, N: 56, scheme }, 9)).got);
          expect(name).toContain(kernels);
        }
        expect(outs.length).toBe(2);
        expect(new Uint32Array(outs[0].buffer)).toEqual(new Uint32Array(outs[1].buffer));
      }
    }
  });

  it('the old fp4 refusal is gone; what still is not supported is refused, naming the rule', () => {
    const eng = engines[0][1];
    const srcMd = memory.desc.grouped([8, 64], dt.f32, 2, [RT, 64]), dstMd = memory.desc.grouped([8, 16], dt.f32, 2, [RT, 16]);
    const dq = (): PrimitiveAttr => new PrimitiveAttr().setDynamicQuantization(ARG.SRC);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.f4_e2m1, tag.any), dstMd, dq().setScales(ARG.WEIGHTS, 7, [1, 32, 1], dt.e8m0));
    expect(pd.implInfo).toMatch(/s16-gemm-3x8-wf4-dq8/);
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.f8_e4m3, tag.any), dstMd, dq()), 'unimplemented', 'weights must be s8, u8, s4, u4 or f4_e2m1');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.f4_e2m1, tag.any), dstMd, dq().setZeroPoints(ARG.WEIGHTS, 5)), 'unimplemented', 'zero points');
    // K blocks read from plain weights: the integer path folds them only on packed panels
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 64, 16], dt.f4_e2m1, tag.abc), dstMd, dq().setScales(ARG.WEIGHTS, 7, [1, 32, 1], dt.e8m0)), 'unimplemented', 'need the weights packed');
  });
});
