/**
 * rfcs/0002 section 5: dynamic quantization helpers (`quant.*`). Expected values are computed here
 * from the spec's formulas (test-side RNE and float rounding), then the helpers' outputs are written
 * into memory objects and run through a quantized matmul.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, PrimitiveAttr, Stream, dt, matmul, memory, quant, tag } from '../src/index.js';
import { expectDnnlError } from './helpers.js';
import { RT, rne, roundFloat } from './quant_helpers.js';
import { mulberry32 } from './workloads.js';

const e4m3 = (x: number): number => roundFloat(x, 3, -6, 448, true);
const e5m2 = (x: number): number => roundFloat(x, 2, -14, 57344, true);
const e2m1 = (x: number): number => roundFloat(x, 1, 0, 6, true);
const randn = (seed: number, n: number, amp = 3): Float64Array => { const r = mulberry32(seed); return Float64Array.from({ length: n }, () => (r() * 2 - 1) * amp); };

describe('quant.perTokenInt8', () => {
  it('symmetric: s = amax / 127 (f32), q = RNE(x / s)', () => {
    const x = randn(1, 4 * 9);
    const r = quant.perTokenInt8(x, [4, 9]);
    expect(r.zeroPoints).toBeUndefined();
    for (let i = 0; i < 4; i++) {
      const row = x.slice(i * 9, i * 9 + 9);
      const s = Math.fround(Math.max(...row.map(Math.abs)) / 127);
      expect(r.scales[i]).toBe(s);
      row.forEach((v, k) => expect(r.values[i * 9 + k]).toBe(rne(v / s)));
      row.forEach((v, k) => expect(Math.abs(r.values[i * 9 + k] * s - v)).toBeLessThanOrEqual(s / 2 + 1e-12));
    }
  });

  it('asymmetric: s = (max - min) / 255, zp = RNE(-min / s) - 128, q = clamp(RNE(x / s) + zp)', () => {
    const x = Float64Array.from([...randn(2, 8), 0, 255, 10, 5, 1, 2, 3, 4]);
    const r = quant.perTokenInt8(x, [2, 8], { symmetric: false });
    for (let i = 0; i < 2; i++) {
      const row = x.slice(i * 8, i * 8 + 8);
      const lo = Math.min(...row), hi = Math.max(...row);
      const s = Math.fround((hi - lo) / 255), zp = rne(-lo / s) - 128;
      expect(r.scales[i]).toBe(s);
      expect(r.zeroPoints![i]).toBe(zp);
      row.forEach((v, k) => expect(r.values[i * 8 + k]).toBe(Math.max(-128, Math.min(127, rne(v / s) + zp))));
    }
    expect(Array.from(r.values.slice(8, 10))).toEqual([-128, 127]);
  });

  it('all-zero rows get scale 1; the shape is validated', () => {
    const r = quant.perTokenInt8(new Float64Array(6), [2, 3]);
    expect(Array.from(r.scales)).toEqual([1, 1]);
    expect(Array.from(r.values)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(() => quant.perTokenInt8([1, 2, 3], [2, 2])).toThrow(DnnlError);
    expectDnnlError(() => quant.perTokenInt8([1, 2, 3], [2, 2]), 'invalid_arguments', 'quant.perTokenInt8: x has 3 elements, shape [2, 2] needs 4');
    expectDnnlError(() => quant.perTokenInt8([1, Number.NaN], [1, 2]), 'invalid_arguments', 'quant.perTokenInt8: x[1] = NaN is not finite');
  });
});

describe('quant.perBlockMx (OCP MX v1.0)', () => {
  it.each([['f8_e4m3', 8, e4m3], ['f8_e5m2', 15, e5m2], ['f4_e2m1', 2, e2m1]] as const)('%s: e = floor(log2(amax)) - emax, q = convert(x / 2^e)', (elem, emax, conv) => {
    const x = randn(3, 64, 20);
    const r = quant.perBlockMx(x, [2, 32], { elem });
    for (let b = 0; b < 2; b++) {
      const blk = x.slice(b * 32, b * 32 + 32);
      const e = Math.floor(Math.log2(Math.max(...blk.map(Math.abs)))) - emax;
      expect(r.scales[b]).toBe(2 ** e);
      expect(r.scaleCodes[b]).toBe(127 + e);
      blk.forEach((v, k) => expect(r.values[b * 32 + k]).toBe(conv(v / 2 ** e)));
    }
  });

  it.each([['f8_e4m3', 448, e4m3], ['f8_e5m2', 57344, e5m2], ['f4_e2m1', 6, e2m1]] as const)('%s rceil: e = ceil(log2(f32(amax / max))), q = convert(x / 2^e), nothing saturates', (elem, max, conv) => {
    const x = randn(13, 3 * 64, 20);
    x[5] = 127; x[64 + 3] = -(2 ** 5); // amax with a large mantissa (floor would saturate it), and an exact power of two
    const r = quant.perBlockMx(x, [3, 64], { elem, rounding: 'rceil' });
    for (let b = 0; b < 6; b++) {
      const blk = x.slice(b * 32, b * 32 + 32);
      const amax = Math.max(...blk.map(Math.abs));
      const e = Math.ceil(Math.log2(Math.fround(amax / max)));
      expect(r.scales[b]).toBe(2 ** e);
      expect(r.scaleCodes[b]).toBe(127 + e);
      blk.forEach((v, k) => expect(r.values[b * 32 + k]).toBe(conv(v / 2 ** e)));
      blk.forEach((v) => expect(Math.abs(v / 2 ** e)).toBeLessThanOrEqual(max));
    }
  });

  it('saturates: amax just below the next power of two overflows the element range', () => {
    const x = new Float64Array(32);
    x[0] = 7.9; x[1] = -7; x[2] = 1;
    const r = quant.perBlockMx(x, [1, 32], { elem: 'f8_e4m3' });
    expect(r.scales[0]).toBe(2 ** -6);
    expect(Array.from(r.values.slice(0, 3))).toEqual([448, -448, 64]);
    const f4 = quant.perBlockMx(x, [1, 32], { elem: 'f4_e2m1' });
    expect(f4.scales[0]).toBe(1);
    expect(Array.from(f4.values.slice(0, 3))).toEqual([6, -6, 1]);
    expect(Array.from(f4.codes.slice(0, 3))).toEqual([0x7, 0xf, 0x2]);
  });

  it('an all-zero block gets the smallest scale; block and elem are validated', () => {
    expect(quant.perBlockMx(new Float64Array(4), [1, 4], { block: 4 }).scaleCodes[0]).toBe(0);
    expect(quant.perBlockMx(new Float64Array(4), [1, 4], { block: 4, rounding: 'rceil' }).scaleCodes[0]).toBe(0);
    expectDnnlError(() => quant.perBlockMx(new Float64Array(12), [2, 6], { block: 4 }), 'invalid_arguments', 'quant.perBlockMx: rows of 6 elements are not a multiple of the block size 4 (a block may not straddle two rows)');
    expectDnnlError(() => quant.perBlockMx(new Float64Array(8), [2, 4], { rounding: 'up' as 'rceil', block: 4 }), 'invalid_arguments', "quant.perBlockMx: rounding must be 'floor' or 'rceil', got 'up'");
    expectDnnlError(() => quant.perBlockMx(new Float64Array(4), [1, 4], { block: 4, elem: 'f16' as 'f8_e4m3' }), 'invalid_arguments', "quant.perBlockMx: elem must be f8_e4m3, f8_e5m2 or f4_e2m1, got 'f16'");
  });
});

describe('quant.perTokenFp8 and quant.perBlockNvfp4', () => {
  it('perTokenFp8: s = amax / max(elem) per row, q = convert(x / s)', () => {
    const x = randn(4, 3 * 16, 100);
    for (const [elem, max, conv] of [['f8_e4m3', 448, e4m3], ['f8_e5m2', 57344, e5m2]] as const) {
      const r = quant.perTokenFp8(x, [3, 16], elem);
      for (let i = 0; i < 3; i++) {
        const row = x.slice(i * 16, i * 16 + 16);
        const s = Math.fround(Math.max(...row.map(Math.abs)) / max);
        expect(r.scales[i]).toBe(s);
        row.forEach((v, k) => expect(r.values[i * 16 + k]).toBe(conv(v / s)));
      }
    }
    expect(quant.maxOf('f8_e5m2')).toBe(57344);
  });

  it('perTokenFp8: the scale is floored at minScale (vLLM: 1 / (max(elem) * 512)); an all-zero row gets the floor, not 1', () => {
    // Row 0 all zeros, row 1 tiny (amax / 448 below the floor), row 2 ordinary.
    const x = Float64Array.from([0, 0, 0, 0, 1e-9, -3e-9, 2e-9, 0, 1, -2, 0.5, 3]);
    for (const [elem, max, conv] of [['f8_e4m3', 448, e4m3], ['f8_e5m2', 57344, e5m2]] as const) {
      const floor = Math.fround(1 / (max * 512));
      expect(quant.fp8MinScale(elem)).toBe(1 / (max * 512));
      for (const [opts, fl] of [[undefined, floor], [{ minScale: 1e-3 }, Math.fround(1e-3)]] as const) {
        const r = quant.perTokenFp8(x, [3, 4], elem, opts);
        for (let i = 0; i < 3; i++) {
          const row = x.slice(i * 4, i * 4 + 4);
          const s = Math.max(Math.fround(Math.max(...row.map(Math.abs)) / max), fl);
          expect(r.scales[i]).toBe(s);
          row.forEach((v, k) => expect(r.values[i * 4 + k]).toBe(conv(v / s)));
        }
        expect(r.scales[0]).toBe(fl);
        expect(r.scales[1]).toBe(fl);
      }
    }
    expectDnnlError(() => quant.perTokenFp8(x, [3, 4], 'f8_e4m3', { minScale: 0 }), 'invalid_arguments', 'quant.perTokenFp8: minScale must be a positive finite number (f32), got 0');
  });

  it('perBlockNvfp4: global = amax / (6 * 448), e4m3 block scale = amax_block / 6 / global, q = f4(x / (s_block * global))', () => {
    const x = randn(5, 48, 10);
    const r = quant.perBlockNvfp4(x, 16);
    const g = Math.fround(Math.max(...x.map(Math.abs)) / (6 * 448));
    expect(r.globalScale).toBe(g);
    for (let b = 0; b < 3; b++) {
      const blk = x.slice(b * 16, b * 16 + 16);
      const s = e4m3(Math.max(...blk.map(Math.abs)) / 6 / g);
      expect(r.blockScales[b]).toBe(s);
      blk.forEach((v, k) => expect(r.values[b * 16 + k]).toBe(e2m1(v / (s * g))));
    }
  });

  it('dequantize: (values - zp) * scale per block', () => {
    expect(Array.from(quant.dequantize([1, 2, 3, 4], [0.5, 2], 2, [1, -1]))).toEqual([0, 0.5, 8, 10]);
    expectDnnlError(() => quant.dequantize([1, 2, 3], [1], 2), 'invalid_arguments', 'quant.dequantize');
  });
});

describe('helpers feed a quantized matmul (values ready for Memory.write)', () => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'none' });
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  it('per-token asymmetric int8 src (per-row scales and zero points) x s8 weights: dst = dequant(src) x wei', async () => {
    const G = 2, K = 32, N = 4, sizes = [3, 2], M = 5;
    const x = randn(6, M * K, 4);
    const q = quant.perTokenInt8(x, [M, K], { symmetric: false });
    const w = Float64Array.from({ length: G * K * N }, (_, i) => ((i * 7) % 9) - 4);
    const attr = new PrimitiveAttr().setScales(ARG.SRC, 1).setZeroPoints(ARG.SRC, 1);
    const srcMd = memory.desc.grouped([M, K], dt.s8, G, [RT, K]), dstMd = memory.desc.grouped([M, N], dt.f32, G, [RT, N]), weiMd = memory.desc([G, K, N], dt.s8, tag.abc);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
    const src = Memory.create(srcMd, eng).write(q.values);
    src.offsets.set([0, 3, 5]);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const wei = Memory.create(weiMd, eng).write(w);
    const ss = Memory.create(pd.queryMd('scales:src')!, eng).write(q.scales);
    const zs = Memory.create(pd.queryMd('zero_points:src')!, eng).write(q.zeroPoints!);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.SRC]: ss, [ARG.ATTR_ZERO_POINTS | ARG.SRC]: zs });
    await strm.wait();
    const deq = quant.dequantize(q.values, q.scales, K, q.zeroPoints);
    const got = dst.read();
    for (let r = 0; r < M; r++) {
      const g = r < sizes[0] ? 0 : 1;
      for (let n = 0; n < N; n++) {
        let acc = 0, exact = 0;
        for (let k = 0; k < K; k++) {
          acc += deq[r * K + k] * w[(g * K + k) * N + n];
          exact += x[r * K + k] * w[(g * K + k) * N + n];
        }
        expect(got[r * N + n]).toBeCloseTo(acc, 3);
        expect(Math.abs(got[r * N + n] - exact)).toBeLessThan(q.scales[r] * 0.5 * K * 4 + 1e-6);
      }
    }
    [src, dst, wei, ss, zs].forEach((m) => m.free());
  });

  it('MXFP4 src and weights from perBlockMx, e8m0 scales per 32: bitwise equal to the float64 product of the dequantized values', async () => {
    const M = 3, K = 64, N = 5;
    const a = randn(7, M * K, 5), b = randn(8, K * N, 2);
    const qa = quant.perBlockMx(a, [M, K], { elem: 'f4_e2m1' });
    // Weights blocks run along K: quantize the transposed [N, K] tensor, then lay it out as [K, N].
    const bt = Float64Array.from({ length: N * K }, (_, i) => b[(i % K) * N + Math.floor(i / K)]);
    const qb = quant.perBlockMx(bt, [N, K], { elem: 'f4_e2m1' });
    const wv = Float64Array.from({ length: K * N }, (_, i) => qb.values[(i % N) * K + Math.floor(i / N)]);
    const ws = Float64Array.from({ length: (K / 32) * N }, (_, i) => qb.scales[(i % N) * (K / 32) + Math.floor(i / N)]);
    const attr = new PrimitiveAttr().setScales(ARG.SRC, 3, [1, 32], dt.e8m0).setScales(ARG.WEIGHTS, 3, [32, 1], dt.e8m0);
    const srcMd = memory.desc([M, K], dt.f4_e2m1, tag.ab), weiMd = memory.desc([K, N], dt.f4_e2m1, tag.ab), dstMd = memory.desc([M, N], dt.f32, tag.ab);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
    const mems = [Memory.create(srcMd, eng).write(qa.values), Memory.create(weiMd, eng).write(wv), Memory.create(dstMd, eng),
      Memory.create(pd.queryMd('scales:src')!, eng).write(qa.scales), Memory.create(pd.queryMd('scales:weights')!, eng).write(ws)];
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: mems[0], [ARG.WEIGHTS]: mems[1], [ARG.DST]: mems[2], [ARG.ATTR_SCALES | ARG.SRC]: mems[3], [ARG.ATTR_SCALES | ARG.WEIGHTS]: mems[4] });
    await strm.wait();
    const want: number[] = [];
    for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += qa.values[m * K + k] * qa.scales[m * 2 + Math.floor(k / 32)] * wv[k * N + n] * ws[Math.floor(k / 32) * N + n];
      want.push(Math.fround(acc));
    }
    expect(Array.from(mems[2].read())).toEqual(want);
    mems.forEach((m) => m.free());
  });
});
