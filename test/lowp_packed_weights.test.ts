/**
 * Issue 12: 8-bit and 4-bit weights behind `tag.any` are packed by `reorder` into x8:p8 / x4:p8k2
 * panels of their codes and decoded in registers by the f32 x low-precision microkernels. Every packed
 * format x scale granularity x tail shape must give exactly the spec's values (test/quant_helpers.ts:
 * exact inputs, so f32 results are compared bit for bit), the same bits at 1, 2 and 3 threads, through
 * P#1 (grouped descriptors), P#2 (offsets attribute) and P#3 (grouped_gemm).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, matmul, memory, reorder, tag, type DataType } from '../src/index.js';
import { GM, expectBitwise, expectClose, expectSameBits, runGM, runP3Q, type GMCase, type Outcome, type P3QCase } from './quant_helpers.js';

const THREADS = [1, 2, 3] as const;
const X8: readonly DataType[] = [dt.s8, dt.u8, dt.f8_e4m3, dt.f8_e5m2];
const X4: readonly DataType[] = [dt.s4, dt.u4, dt.f4_e2m1];
const INTS: readonly DataType[] = [dt.s8, dt.u8, dt.s4, dt.u4];
const SUFFIX = (t: DataType): string => (t === 'f4_e2m1' ? '-wf4' : t.startsWith('f8') ? '-wf8' : X4.includes(t) ? '-w4' : '-w8');

// An expert of 70 rows (two 64-row M-blocks), an empty one, one-row ones; N = 21: a 5-column panel.
const SHAPE = { G: 5, N: 21, sizes: [70, 0, 9, 1, 33], packed: true } as const;

/** Weight scale (and zero point) granularities; K chosen per granularity (odd K, K-blocks starting at odd k). */
function cases(wdt: DataType): [string, GMCase][] {
  const c: [string, GMCase][] = [
    ['no scales, K = 99 (odd)', { ...SHAPE, K: 99, weiDt: wdt }],
    ['per tensor, K = 64', { ...SHAPE, K: 64, weiDt: wdt, scales: { weights: { gran: GM.weights.tensor } } }],
    ['per expert column, K = 101', { ...SHAPE, K: 101, weiDt: wdt, scales: { weights: { gran: GM.weights.expertCol } } }],
    ['K-blocks of 3 (blocks start at odd k), K = 99', { ...SHAPE, K: 99, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(3) } } }],
    ['K-blocks of 32, K = 96', { ...SHAPE, K: 96, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(32) } } }],
    ['8x7 blocks (K x N), K = 96, N = 21', { ...SHAPE, K: 96, weiDt: wdt, scales: { weights: { gran: GM.weights.block2d(8, 7) } } }],
    ['per expert column + bias + swiglu (halves: GLU segments off the panels), K = 40', { ...SHAPE, K: 40, N: 42, weiDt: wdt, scales: { weights: { gran: GM.weights.expertCol } }, bias: true, glu: { alg: 'glu_swiglu', layout: 'halves' } }],
    ['bf16 activations, f16 K-block-16 scales -> bf16, K = 48', { ...SHAPE, K: 48, srcDt: dt.bf16, dstDt: dt.bf16, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(16), dt: dt.f16 } } }],
  ];
  if (wdt === dt.f4_e2m1) {
    c.push(['MXFP4: e8m0 scales per 32, K = 64', { ...SHAPE, K: 64, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }]);
    c.push(['NVFP4: f8_e4m3 scales per 16 + per-expert dst scale, K = 48', { ...SHAPE, K: 48, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(16), dt: dt.f8_e4m3 }, dst: { gran: GM.dst.expert } } }]);
  }
  if (wdt.startsWith('f8')) c.push(['MXFP8: e8m0 scales per 32, K = 64', { ...SHAPE, K: 64, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }]);
  if (INTS.includes(wdt)) {
    const zdt = wdt === dt.u8 || wdt === dt.u4 ? dt.u8 : dt.s8;
    c.push(['zero points per expert column + scales per column, K = 37', { ...SHAPE, K: 37, weiDt: wdt, scales: { weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: zdt } } }]);
    c.push(['zero points and scales in K-blocks of 5, K = 45', { ...SHAPE, K: 45, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(5) } }, zps: { weights: { gran: GM.weights.kBlock(5), dt: zdt } } }]);
  }
  return c;
}

describe('packed low-precision weights (x8:p8 / x4:p8k2), decoded in the microkernel', () => {
  const engines: Engine[] = [];
  const streams: Stream[] = [];
  beforeAll(async () => {
    for (const threads of THREADS) {
      const e = await Engine.create({ threads, kernels: 'simd128' });
      engines.push(e);
      streams.push(new Stream(e));
    }
  });
  let relaxed: Engine;
  let relaxedStream: Stream;
  beforeAll(async () => {
    relaxed = await Engine.create({ threads: 2, kernels: 'relaxed' });
    relaxedStream = new Stream(relaxed);
  });
  afterAll(() => {
    engines.forEach((e) => e.release());
    relaxed.release();
  });

  for (const wdt of [...X8, ...X4]) {
    describe(`${wdt} weights`, () => {
      it.each(cases(wdt))('P1 / P2, %s: exact, 1/2/3 threads bitwise identical', async (_n, c) => {
        for (const proposal of ['P1', 'P2'] as const) {
          const outs: Outcome[] = [];
          for (let i = 0; i < engines.length; i++) {
            const o = await runGM(engines[i], streams[i], { ...c, proposal });
            expect(o.pd.implInfo).toBe(`wasm:simd128:f32-gemm-4x8${SUFFIX(wdt)}`);
            // swiglu's logistic is not exact: that case is checked to f32 rounding (the threads still bitwise).
            if (c.glu) expectClose(o, 2e-6, 1e-5, `${proposal} ${THREADS[i]}T`);
            else expectBitwise(o, `${proposal} ${THREADS[i]}T`);
            outs.push(o);
          }
          for (let i = 1; i < outs.length; i++) expectSameBits(outs[i], outs[0], `${proposal}: ${THREADS[i]} threads vs 1`);
          expect(outs[0].want.some((v) => v !== 0), 'a non-trivial result').toBe(true);
          // The relaxed-SIMD build (FMA on the first k of each pair) on the same exact values.
          const r = await runGM(relaxed, relaxedStream, { ...c, proposal });
          expect(r.pd.implInfo).toBe(`wasm:relaxed:f32-gemm-4x8${SUFFIX(wdt)}`);
          if (c.glu) expectClose(r, 2e-6, 1e-5, `${proposal} relaxed`);
          else expectBitwise(r, `${proposal} relaxed`);
        }
      });
    });
  }

  it.each([...X8, ...X4])('P#3 grouped_gemm, %s weights tag.any (experts of different K and N), K-block and column scales', async (wdt) => {
    // One plan serves every expert: K-block scales need the same N (their row stride), column scales do not.
    const kb: P3QCase = { experts: [{ K: 64, N: 21, rows: 70 }, { K: 32, N: 21, rows: 0 }, { K: 96, N: 21, rows: 5 }], weiDt: wdt, scales: { weights: { kind: 16 } }, packed: true };
    const col: P3QCase = { experts: [{ K: 64, N: 21, rows: 70 }, { K: 33, N: 16, rows: 0 }, { K: 95, N: 9, rows: 5 }], weiDt: wdt, scales: { weights: { kind: 'col' } }, packed: true };
    for (const c of [kb, col]) await p3(c, wdt);
  });

  async function p3(c: P3QCase, wdt: DataType): Promise<void> {
    const outs: Outcome[] = [];
    for (let i = 0; i < engines.length; i++) {
      const o = await runP3Q(engines[i], streams[i], c);
      expect(o.pd.implInfo).toBe(`wasm:simd128:f32-gemm-4x8${SUFFIX(wdt)}`);
      expectBitwise(o, `P3 ${THREADS[i]}T`);
      outs.push(o);
    }
    for (let i = 1; i < outs.length; i++) expectSameBits(outs[i], outs[0], `P3: ${THREADS[i]} threads vs 1`);
  }

  it('the packed weights take 1 byte (8-bit) / half a byte (4-bit) per weight, panels padded to 8 columns and even K', () => {
    const eng = engines[0];
    for (const [wdt, per] of [[dt.s8, 1], [dt.f8_e5m2, 1], [dt.u4, 0.5], [dt.f4_e2m1, 0.5]] as const) {
      const pd = new matmul.PrimitiveDesc(eng, memory.desc.grouped([10, 99], dt.f32, 3, [RT, 99]), memory.desc([3, 99, 21], wdt, tag.any), memory.desc.grouped([10, 21], dt.f32, 3, [RT, 21]));
      const md = pd.queryMd('weights')!;
      expect(md.format).toBe('packed');
      expect(md.getSize(0)).toBe(3 * 3 * 100 * 8 * per);
    }
  });

  it.each([[dt.u8, 'x8:p8'], [dt.u4, 'x4:p8k2']] as const)('reorder %s -> %s: the panels hold exactly the stored codes, padding zero', async (wdt, name) => {
    const eng = engines[0];
    const dims = [2, 5, 11], [G, K, N] = dims;
    const four = name === 'x4:p8k2';
    const plain = Memory.create(memory.desc(dims, wdt, tag.abc), eng);
    const codes = plain.bytes();
    for (let i = 0; i < codes.length; i++) codes[i] = (i * 37 + 11) & 0xff;
    const code = (g: number, k: number, n: number): number => {
      const i = (g * K + k) * N + n;
      return four ? (codes[i >> 1] >> ((i & 1) * 4)) & 0xf : codes[i];
    };
    const pd = new matmul.PrimitiveDesc(eng, memory.desc.grouped([4, K], dt.f32, G, [RT, K]), memory.desc(dims, wdt, tag.any), memory.desc.grouped([4, N], dt.f32, G, [RT, N]));
    const packed = Memory.create(pd.queryMd('weights')!, eng);
    expect(packed.desc.packed?.name).toBe(name);
    const r = new reorder.PrimitiveDesc(eng, plain.desc, packed.desc);
    expect(r.implInfo).toBe(`wasm:simd128:pack-${four ? 'x4p8k2' : 'x8p8'}`);
    const strm = new Stream(eng);
    new reorder.Primitive(r).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: packed });
    await strm.wait();
    const out = packed.bytes();
    const Kp = 6, panels = 2, per = (panels * Kp * 8) / (four ? 2 : 1);
    const bad: string[] = [];
    for (let g = 0; g < G; g++)
      for (let p = 0; p < panels; p++)
        for (let k = 0; k < Kp; k++)
          for (let q = 0; q < 8; q++) {
            const n = p * 8 + q;
            const want = n < N && k < K ? code(g, k, n) : 0;
            const got = four ? (out[g * per + (p * (Kp / 2) + (k >> 1)) * 8 + q] >> ((k & 1) * 4)) & 0xf : out[g * per + (p * Kp + k) * 8 + q];
            if (got !== want) bad.push(`g${g} k${k} n${n}: ${got} want ${want}`);
          }
    expect(bad.slice(0, 5)).toEqual([]);
    plain.free();
    packed.free();
  });
});

describe('in-register fp8 decoding = the scalar decoders, all 256 codes (NaN, Inf, subnormals)', () => {
  it.each([dt.s8, dt.u8, dt.f8_e4m3, dt.f8_e5m2].flatMap((t) => (['simd128', 'relaxed'] as const).map((isa) => [t, isa] as const)))('%s, %s kernels', async (t, kernels) => {
    const eng = await Engine.create({ threads: 1, kernels });
    try {
      const k = eng.kernels!;
      const codes = eng.alloc(256), a = eng.alloc(1024), b = eng.alloc(1024);
      new Uint8Array(eng.buffer, codes, 256).forEach((_, i, arr) => (arr[i] = i));
      const DT = { s8: 3, u8: 4, f8_e4m3: 7, f8_e5m2: 8 } as Record<string, number>;
      k.check_decode(DT[t], codes, a, 256);
      k.check_decode_w8(DT[t], codes, b, 256);
      const want = new Uint32Array(eng.buffer, a, 256), got = new Uint32Array(eng.buffer, b, 256);
      const bad: string[] = [];
      for (let i = 0; i < 256; i++) if (want[i] !== got[i]) bad.push(`code ${i}: ${got[i].toString(16)} want ${want[i].toString(16)}`);
      expect(bad.slice(0, 5)).toEqual([]);
    } finally {
      eng.release();
    }
  });
});

describe('packed low-precision weights (scales beside the panels, or at execution) give bitwise what the same weights give plain (inexact values, every tile height)', () => {
  const GRANS = [['per column', 5, [] as number[]], ['K-blocks of 40', 7, [1, 40, 1]], ['K-blocks of 3 (odd starts)', 7, [1, 3, 1]]] as const;
  const cases = [dt.s8, dt.u4, dt.f4_e2m1, dt.f8_e5m2, dt.f8_e4m3].flatMap((w) => GRANS.map((g) => [w, ...g] as const));
  it.each(cases)('%s weights, scales %s', async (wdt, _name, mask, groups) => {
    for (const opts of [{ threads: 1, kernels: 'simd128' }, { threads: 3, kernels: 'simd128' }, { threads: 2, kernels: 'relaxed' }] as const) {
      const eng = await Engine.create(opts);
      const strm = new Stream(eng);
      try {
        // Experts of 70 (a 64-row tile + 6), 1, 2, 0 and 5 rows: in-register decoding and L1 blocks.
        const sizes = [70, 1, 2, 0, 5], G = sizes.length, K = 600, N = 19, T = 78;
        const attr = new PrimitiveAttr();
        attr.setScales(ARG.WEIGHTS, mask, [...groups], dt.f32);
        const srcMd = memory.desc.grouped([T, K], dt.f32, G, [RT, K]), dstMd = memory.desc.grouped([T, N], dt.f32, G, [RT, N]);
        const plainMd = memory.desc([G, K, N], wdt, tag.abc);
        const pdPacked = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], wdt, tag.any), dstMd, attr);
        const pdPlain = new matmul.PrimitiveDesc(eng, srcMd, plainMd, dstMd, attr);
        // Runtime scales on packed codes: the codes-only layout (a pd without weights scales picks it).
        const codesMd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], wdt, tag.any), dstMd).queryMd('weights')!;
        const pdCodes = new matmul.PrimitiveDesc(eng, srcMd, codesMd, dstMd, attr);
        expect(pdPacked.implInfo).toContain(SUFFIX(wdt));
        expect(pdCodes.implInfo).toContain(SUFFIX(wdt));
        expect(pdPacked.queryMd('weights')!.packed?.quant?.scales).toBeDefined();
        expect(codesMd.packed?.quant).toBeUndefined();
        expect(pdPlain.implInfo).toContain('f32-gemm-4x8-fused');
        const plain = Memory.create(plainMd, eng);
        plain.write(Float64Array.from({ length: G * K * N }, (_, i) => ((i * 7919) % 13) - 6).map((v) => (wdt === dt.u4 ? Math.abs(v) : wdt === dt.f4_e2m1 ? Math.max(-6, Math.min(6, v)) : v)));
        const scales = Memory.create(pdPacked.queryMd('scales:weights')!, eng);
        scales.write(Float64Array.from({ length: scales.elementCount }, (_, i) => 0.01 + ((i * 31) % 17) / 97));
        const wei = Memory.create(pdPacked.queryMd('weights')!, eng);
        new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales });
        const codes = Memory.create(codesMd, eng);
        new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, codes.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: codes });
        const src = Memory.create(srcMd, eng);
        src.write(Float32Array.from({ length: T * K }, (_, i) => Math.sin(i * 0.37) * 1.7));
        src.offsets.set(sizes.reduce((o, x) => [...o, o[o.length - 1] + x], [0]));
        const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
        const run = async (pd: matmul.PrimitiveDesc, w: Memory, runtime: boolean): Promise<Float32Array> => {
          new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: w, [ARG.DST]: dst, ...(runtime ? { [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales } : {}) });
          await strm.wait();
          return new Float32Array(dst.values as Float32Array).slice();
        };
        const a = await run(pdPacked, wei, false), b = await run(pdPlain, plain, true), c = await run(pdCodes, codes, true);
        expect(a.some((v) => v !== 0)).toBe(true);
        for (const [other, what] of [[b, 'plain'], [c, 'packed codes + runtime scales']] as const) {
          const bad: number[] = [];
          for (let i = 0; i < a.length; i++) if (!Object.is(a[i], other[i])) bad.push(i);
          expect(bad.slice(0, 5), `${opts.kernels} ${opts.threads}T: ${bad.length} elements differ from ${what}`).toEqual([]);
        }
        [plain, wei, codes, scales, src, dst].forEach((m) => m.free());
      } finally {
        eng.release();
      }
    }
  });
});

describe('packed low-precision weights at the very end of the engine heap', () => {
  it.each([dt.u4, dt.s8])('%s: the kernels read nothing past the last panel (3-row and 1-row tiles)', async (wdt) => {
    const eng = await Engine.create({ threads: 1, kernels: 'simd128' });
    const strm = new Stream(eng);
    try {
      const K = 256, N = 4096, M = 4;
      const srcMd = memory.desc.grouped([M, K], dt.f32, 2, [RT, K]), dstMd = memory.desc.grouped([M, N], dt.f32, 2, [RT, N]);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, K, N], wdt, tag.any), dstMd);
      const packedMd = pd.queryMd('weights')!;
      const plain = Memory.create(memory.desc([2, K, N], wdt, tag.abc), eng);
      plain.write(Float64Array.from({ length: 2 * K * N }, (_, i) => (i * 7) % 15 - (wdt === dt.u4 ? 0 : 7)));
      const src = Memory.create(srcMd, eng);
      src.write(Float32Array.from({ length: M * K }, (_, i) => (i % 5) - 2));
      src.offsets.set([0, 3, 4]); // expert 0: a 3-row tile (read-ahead pass), expert 1: a 1-row tile
      const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      const prim = new matmul.Primitive(pd);
      const run = async (w: Memory): Promise<Float32Array> => {
        const p = Memory.create(packedMd, eng, w.handles[0]);
        new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, p.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: p });
        prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: p, [ARG.DST]: dst });
        await strm.wait();
        return new Float32Array(dst.values as Float32Array).slice();
      };
      const first = Memory.create(packedMd, eng); // also allocates the kernel scratch
      const want = await run(first);
      // Put the next packed buffer exactly at the end of the heap: fill up to byteLength - size (the
      // heap's top is private; a test may look).
      const size = packedMd.getSize(0);
      const top = (eng.heap as unknown as { top: number }).top;
      const gap = eng.heap.byteLength - size - top;
      expect(gap).toBeGreaterThanOrEqual(0);
      const filler = gap > 0 ? eng.heap.alloc(gap) : 0;
      const last = Memory.create(packedMd, eng);
      expect(last.handles[0] + size).toBe(eng.heap.byteLength);
      const got = await run(last);
      expect(Array.from(got)).toEqual(Array.from(want));
      expect(want.some((v) => v !== 0)).toBe(true);
      if (filler) eng.heap.release(filler);
      [plain, src, dst, first, last].forEach((m) => m.free());
    } finally {
      eng.release();
    }
  });
});
