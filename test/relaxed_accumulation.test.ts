/**
 * rfcs/0007: attr accumulation_mode. `relaxed` lets the weight-only s8 / u8 / s4 / u4 / f4_e2m1 matmul run its
 * 1-2 row tiles on the reordered f32_gemm_1x16r kernels (codes summed per K block, the scale once per
 * block, FMA, split chains). Checked here: on exact inputs (quant_helpers: every partial sum exact) the
 * reordered sums still give the spec's bits; on random f32 inputs the error stays within the float64
 * reference's tolerance; 1 and 2 threads give the same bits; the attribute's bad values throw.
 * `strict` (the default) stays bitwise what it was: lowp_packed_weights.test.ts and the other tests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, PrimitiveAttr, Stream, dt, matmul, memory, moe, reorder, tag, type DataType } from '../src/index.js';
import { expectDnnlError } from './helpers.js';
import { refMoeLayer } from './moe_layer_reference.js';
import { GM, expectBitwise, expectSameBits, runGM, type GMCase, type Outcome } from './quant_helpers.js';
import { mulberry32 } from './workloads.js';
import { runQuantLayer } from './moe_layer_quant_helpers.js';

const INTS: readonly DataType[] = [dt.s8, dt.u8, dt.s4, dt.u4, dt.f4_e2m1];
const SUFFIX = (t: DataType): string => (t === dt.f4_e2m1 ? '-wf4' : t === dt.s4 || t === dt.u4 ? '-w4' : '-w8');

// Decode-like experts: 1 and 2 rows (the relaxed tiles), an empty one, a 5-row one (strict: tall tiles).
const DECODE = { G: 6, N: 21, sizes: [1, 0, 2, 1, 5, 2], packed: true, accumulationMode: 'relaxed' } as const;

/** [name, case, relaxed kernels expected] */
function cases(wdt: DataType): [string, GMCase, boolean][] {
  const all: [string, GMCase, boolean][] = [
    ['no scales, K = 99 (not a multiple of 4)', { ...DECODE, K: 99, weiDt: wdt }, true],
    ['per expert column, K = 101, N = 21 (an odd last panel)', { ...DECODE, K: 101, weiDt: wdt, scales: { weights: { gran: GM.weights.expertCol } } }, true],
    ['K-blocks of 32, K = 96', { ...DECODE, K: 96, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(32) } } }, true],
    ['K-blocks of 12, K = 2112 (an A block of 2048 ends mid-block)', { ...DECODE, G: 3, sizes: [1, 2, 0], N: 16, K: 2112, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(12) } } }, true],
    ['E = 1, one row, K-blocks of 4, K = 40', { ...DECODE, G: 1, sizes: [1], N: 8, K: 40, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(4) } } }, true],
    ['one expert with every row (2), K = 64, N = 40', { ...DECODE, G: 3, sizes: [0, 2, 0], N: 40, K: 64, weiDt: wdt, scales: { weights: { gran: GM.weights.expertCol } } }, true],
    ['K-blocks of 3: strict kernels', { ...DECODE, K: 99, weiDt: wdt, scales: { weights: { gran: GM.weights.kBlock(3) } } }, false],
    ['zero points: strict kernels', { ...DECODE, K: 37, weiDt: wdt, scales: { weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: wdt === dt.u8 || wdt === dt.u4 ? dt.u8 : dt.s8 } } }, false],
  ];
  return wdt === dt.f4_e2m1 ? all.filter(([name]) => !name.startsWith('zero points')) : all; // floats take no zero points
}

describe('accumulation_mode relaxed: weight-only integer decode kernels', () => {
  const engines: [Engine, Stream][] = [];
  beforeAll(async () => {
    for (const [threads, kernels] of [[1, 'simd128'], [2, 'simd128'], [1, 'relaxed'], [2, 'relaxed']] as const) {
      const e = await Engine.create({ threads, kernels });
      engines.push([e, new Stream(e)]);
    }
  });
  afterAll(() => engines.forEach(([e]) => e.release()));

  for (const wdt of INTS) {
    it.each(cases(wdt))(`${wdt}: %s: the spec's bits, 1 and 2 threads identical`, async (_n, c, fast) => {
      for (const proposal of ['P1', 'P2'] as const) {
        const outs: Outcome[] = [];
        for (const [e, s] of engines) {
          const o = await runGM(e, s, { ...c, proposal });
          expect(o.pd.implInfo).toBe(`wasm:${e.isa}:f32-gemm-4x8${SUFFIX(wdt)}${fast ? `+f32-gemm-1x16r${SUFFIX(wdt)}` : ''}`);
          expectBitwise(o, `${proposal} ${e.isa} ${e.threads}T`);
          outs.push(o);
        }
        expectSameBits(outs[1], outs[0], `${proposal} simd128: 2 threads vs 1`);
        expectSameBits(outs[3], outs[2], `${proposal} relaxed: 2 threads vs 1`);
      }
    });
  }
});

/** Random f32 activations x random codes x random f32 scales, dense 2D (M rows, a 1-2 row tile). */
interface RandomRun { got: Float32Array; want: Float64Array; mag: Float64Array; implInfo: string; x: Float64Array; w: Float64Array; sc: Float64Array }
async function runRandom(e: Engine, s: Stream, wdt: DataType, M: number, K: number, N: number, kBlock: number, mode: 'strict' | 'relaxed',
  given?: { x: Float64Array; w: Float64Array; sc: Float64Array }): Promise<RandomRun> {
  const rng = mulberry32(1234 + K + N + M);
  const x = given?.x ?? Float64Array.from({ length: M * K }, () => Math.fround(rng() * 2 - 1));
  const lo = wdt === dt.s8 ? -128 : wdt === dt.s4 ? -8 : 0, hi = wdt === dt.s8 ? 127 : wdt === dt.u8 ? 255 : wdt === dt.s4 ? 7 : 15;
  const F4 = [0, 0.5, 1, 1.5, 2, 3, 4, 6].flatMap((v) => [v, -v]); // every f4_e2m1 value, -0 included
  const w = given?.w ?? Float64Array.from({ length: K * N }, () => (wdt === dt.f4_e2m1 ? F4[Math.floor(rng() * F4.length)] : lo + Math.floor(rng() * (hi - lo + 1))));
  const nb = kBlock ? K / kBlock : 1;
  const sc = given?.sc ?? Float64Array.from({ length: nb * N }, () => Math.fround(0.01 + 0.02 * rng()));
  const attr = new PrimitiveAttr().setScales(ARG.WEIGHTS, kBlock ? 3 : 2, kBlock ? [kBlock, 1] : []).setAccumulationMode(mode);
  const pd = new matmul.PrimitiveDesc(e, memory.desc([M, K], dt.f32, tag.ab), memory.desc([K, N], wdt, tag.any), memory.desc([M, N], dt.f32, tag.ab), attr);
  const mems: Memory[] = [];
  const mk = (md: Parameters<typeof Memory.create>[0]): Memory => { const m = Memory.create(md, e); mems.push(m); return m; };
  try {
    const src = mk(memory.desc([M, K], dt.f32, tag.ab)).write(x);
    const plain = mk(memory.desc([K, N], wdt, tag.ab)).write(w);
    const scales = mk(memory.desc(kBlock ? [nb, N] : [N], dt.f32, kBlock ? tag.ab : tag.a)).write(sc);
    const wei = mk(pd.queryMd('weights')!);
    const dst = mk(memory.desc([M, N], dt.f32, tag.ab));
    const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    const r: Record<number, Memory> = { [ARG.FROM]: plain, [ARG.TO]: wei };
    if (wei.desc.packed?.quant?.scales) r[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales;
    else args[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales;
    new reorder.Primitive(new reorder.PrimitiveDesc(e, plain.desc, wei.desc)).execute(s, r);
    new matmul.Primitive(pd).execute(s, args);
    await s.wait();
    const want = new Float64Array(M * N), mag = new Float64Array(M * N);
    for (let m = 0; m < M; m++)
      for (let n = 0; n < N; n++)
        for (let k = 0; k < K; k++) {
          const t = x[m * K + k] * w[k * N + n] * sc[(kBlock ? Math.floor(k / kBlock) : 0) * N + n];
          want[m * N + n] += t;
          mag[m * N + n] += Math.abs(t);
        }
    return { got: Float32Array.from(dst.read()), want, mag, implInfo: pd.implInfo, x, w, sc };
  } finally {
    mems.forEach((m) => m.free());
  }
}

/** Largest |got - want| / Σ|terms| (the float64 reference's error measure of a dot product). */
function worst(o: { got: Float32Array; want: Float64Array; mag: Float64Array }): number {
  let e = 0;
  for (let i = 0; i < o.got.length; i++) e = Math.max(e, Math.abs(o.got[i] - o.want[i]) / o.mag[i]);
  return e;
}

describe('accumulation_mode relaxed on random f32 activations: within the float64 reference tolerance', () => {
  const engines: [Engine, Stream][] = [];
  beforeAll(async () => {
    for (const [threads, kernels] of [[1, 'simd128'], [2, 'relaxed'], [1, 'relaxed']] as const) {
      const e = await Engine.create({ threads, kernels });
      engines.push([e, new Stream(e)]);
    }
  });
  afterAll(() => engines.forEach(([e]) => e.release()));

  // K = 2560 in blocks of 1280: the block across the A blocks' boundary (2048) runs the strict kernels; in blocks of
  // 2560: longer than a relaxed piece (2048 k), strict inside.
  const SHAPES = [[1, 1002, 40, 0], [2, 1024, 24, 32], [1, 2048, 16, 64], [2, 130, 21, 0], [2, 2560, 16, 1280], [1, 2560, 16, 2560]] as const;
  for (const wdt of INTS) {
    it.each(SHAPES)(`${wdt}: M = %i, K = %i, N = %i, K block %i`, async (M, K, N, kb) => {
      for (const [e, s] of engines) {
        const strict = await runRandom(e, s, wdt, M, K, N, kb, 'strict');
        const relaxed = await runRandom(e, s, wdt, M, K, N, kb, 'relaxed');
        if (process.env.RX_LOG) console.log(`ERR ${wdt} ${M}x${K}x${N} kb${kb} ${e.isa} strict ${worst(strict).toExponential(2)} relaxed ${worst(relaxed).toExponential(2)}`);
        expect(relaxed.implInfo).toContain('+f32-gemm-1x16r');
        // f32 sums of K terms: a few ulps of Σ|terms| (measured: strict 3e-8 - 1.3e-7, relaxed 6e-9 - 1.3e-7)
        expect(worst(strict), `strict ${e.isa} ${e.threads}T`).toBeLessThan(5e-7);
        expect(worst(relaxed), `relaxed ${e.isa} ${e.threads}T`).toBeLessThan(5e-7);
      }
      // thread count never changes the relaxed bits
      const [a, b] = [await runRandom(engines[1][0], engines[1][1], wdt, M, K, N, kb, 'relaxed'), await runRandom(engines[2][0], engines[2][1], wdt, M, K, N, kb, 'relaxed')];
      expect(Array.from(a.got)).toEqual(Array.from(b.got));
    });
  }
});

describe('accumulation_mode relaxed: the 2-row tile', () => {
  const engines: [Engine, Stream][] = [];
  beforeAll(async () => {
    for (const kernels of ['simd128', 'relaxed'] as const) {
      const e = await Engine.create({ threads: 1, kernels });
      engines.push([e, new Stream(e)]);
    }
  });
  afterAll(() => engines.forEach(([e]) => e.release()));

  // f32_gemm_2x16r converts each code once for both rows; each row must keep the bits the 1-row kernels give it.
  const SHAPES = [[2048, 24, 64], [1100, 21, 0], [96, 16, 12]] as const;
  for (const wdt of INTS) {
    it.each(SHAPES)(`${wdt}: K = %i, N = %i, K block %i: each row of a 2-row tile has the bits of that row alone`, async (K, N, kb) => {
      for (const [e, s] of engines) {
        const two = await runRandom(e, s, wdt, 2, K, N, kb, 'relaxed');
        expect(worst(two), `${e.isa}`).toBeLessThan(5e-7);
        for (let m = 0; m < 2; m++) {
          const one = await runRandom(e, s, wdt, 1, K, N, kb, 'relaxed', { x: two.x.slice(m * K, (m + 1) * K), w: two.w, sc: two.sc });
          expect(Buffer.from(one.got.buffer).equals(Buffer.from(two.got.slice(m * N, (m + 1) * N).buffer)), `${e.isa} row ${m}`).toBe(true);
        }
      }
    });
  }
});

describe('attr.setAccumulationMode', () => {
  it('defaults to strict, renders relaxed / any, and is not the default attr', () => {
    const a = new PrimitiveAttr();
    expect(a.accumulationMode).toBe('strict');
    expect(a.isDefault).toBe(true);
    a.setAccumulationMode('relaxed');
    expect(a.relaxedAccumulation).toBe(true);
    expect(a.isDefault).toBe(false);
    expect(a.toString()).toBe('attr-acc-mode:relaxed');
    expect(a.setAccumulationMode('any').relaxedAccumulation).toBe(true);
    expect(a.setAccumulationMode('strict').isDefault).toBe(true);
  });
  it('a bad value throws invalid_arguments naming accumulation_mode; accumulator data types unimplemented', () => {
    const bad = (): unknown => new PrimitiveAttr().setAccumulationMode('fast' as 'strict');
    expect(bad).toThrow(DnnlError);
    expect(bad).toThrow(/invalid_arguments: attr.setAccumulationMode: accumulation_mode must be one of .*got 'fast'/);
    expect(() => new PrimitiveAttr().setAccumulationMode('s32')).toThrow(/unimplemented: .*accumulation_mode 's32'/);
  });
});

describe('moe.layer accumulationMode: relaxed', () => {
  const engines: [Engine, Stream][] = [];
  beforeAll(async () => {
    for (const threads of [1, 2]) {
      const e = await Engine.create({ threads });
      engines.push([e, new Stream(e)]);
    }
  });
  afterAll(() => engines.forEach(([e]) => e.release()));

  // Decode: 3 tokens x top-2 over 5 experts; `skew` sends every token's slots to experts 0 and 1 (one expert
  // with every row, the others empty); E = 1 with top-1.
  const T = 3, K = 72, I = 40;
  async function layer(eng: Engine, strm: Stream, wdt: DataType, E: number, topK: number, blk: number, skew: boolean, mode: 'strict' | 'relaxed') {
    const rng = mulberry32(99 + E + blk);
    const lo = wdt === dt.s4 ? -8 : wdt === dt.f4_e2m1 ? -6 : -128, hi = wdt === dt.s4 ? 7 : wdt === dt.f4_e2m1 ? 6 : 127;
    const F4 = [0, 0.5, 1, 1.5, 2, 3, 4, 6].flatMap((v) => [v, -v]);
    const codes = (n: number): Float64Array => Float64Array.from({ length: n }, () => (wdt === dt.f4_e2m1 ? F4[Math.floor(rng() * F4.length)] : lo + Math.floor(rng() * (hi - lo + 1))));
    const c13 = codes(E * K * 2 * I), c2 = codes(E * I * K);
    const sc = (n: number): Float64Array => Float64Array.from({ length: n }, () => Math.fround((0.5 + rng()) / (hi * 8)));
    const nb13 = blk ? K / blk : 1, nb2 = blk ? I / blk : 1;
    const s13 = sc(E * nb13 * 2 * I), s2 = sc(E * nb2 * K);
    const hidden = Float64Array.from({ length: T * K }, () => Math.fround(rng() * 2 - 1));
    const logits = Float64Array.from({ length: T * E }, (_, i) => Math.fround(rng() * 4 + (skew && i % E < 2 ? 50 : 0)));
    const r = await runQuantLayer(eng, strm, { T, K, I, E, topK, wdt, blk, c13, c2, s13, s2, hidden, logits, options: { accumulationMode: mode } });
    const deq = (c: Float64Array, s: Float64Array, R: number, C: number, b: number): Float64Array => c.map((v, i) => {
      const e = Math.floor(i / (R * C)), r = Math.floor(i / C) % R, col = i % C;
      return v * s[(e * (b ? R / b : 1) + (b ? Math.floor(r / b) : 0)) * C + col];
    });
    const ref = refMoeLayer({
      T, K, I, k: topK, hidden, ids: r.ids, weights: r.weights,
      w13: deq(c13, s13, K, 2 * I, blk), w2: deq(c2, s2, I, K, blk), glu: { alg: 'glu_swiglu', layout: 'halves' },
    });
    return { out: r.out, ref, ids: r.ids, impl: r.impl };
  }

  for (const [name, wdt, E, topK, blk, skew] of [
    ['s4 K-blocks of 8, 5 experts', dt.s4, 5, 2, 8, false], ['s8 per column, one expert pair takes every row', dt.s8, 5, 2, 0, true],
    ['s4 per column, E = 1', dt.s4, 1, 1, 0, false], ['f4_e2m1 K-blocks of 8 (MXFP4-like), 5 experts', dt.f4_e2m1, 5, 2, 8, false],
  ] as const) {
    it(`${name}: float64 reference, 1 and 2 threads the same bits`, async () => {
      const r1 = await layer(engines[0][0], engines[0][1], wdt, E, topK, blk, skew, 'relaxed');
      const r2 = await layer(engines[1][0], engines[1][1], wdt, E, topK, blk, skew, 'relaxed');
      for (const i of r1.impl) expect(i).toMatch(/\+f32-gemm-1x16r-wf?[48]$/);
      if (skew) for (let t = 0; t < T; t++) expect([...r1.ids.subarray(t * 2, t * 2 + 2)].sort()).toEqual([0, 1]);
      let worstErr = 0;
      for (let i = 0; i < r1.out.length; i++) worstErr = Math.max(worstErr, Math.abs(r1.out[i] - r1.ref.value[i]) / (r1.ref.mag[i] + 1e-30));
      expect(worstErr).toBeLessThan(2e-5); // moe_layer.test.ts's tolerance
      expect(Buffer.from(r2.out.buffer).equals(Buffer.from(r1.out.buffer)), '1 vs 2 threads').toBe(true);
      const strict = await layer(engines[0][0], engines[0][1], wdt, E, topK, blk, skew, 'strict');
      for (const i of strict.impl) expect(i).not.toContain('1x16r');
    });
  }

  it('a bad accumulationMode throws invalid_arguments naming it; s32 is unimplemented', () => {
    const [e] = engines[0];
    const base = { tokens: 2, hidden: 16, intermediate: 8, experts: 2, topK: 1 };
    expectDnnlError(() => new moe.layer.PrimitiveDesc(e, { ...base, accumulationMode: 'loose' as 'strict' }), 'invalid_arguments', 'accumulationMode must be one of');
    expectDnnlError(() => new moe.layer.PrimitiveDesc(e, { ...base, accumulationMode: 's32' }), 'unimplemented', "accumulationMode 's32'");
  });
});

describe('accumulation_mode relaxed: rows with an infinite or huge activation run the strict kernels', () => {
  // The relaxed sums carry the codes' bias, corrected by bias x Σx per block (Inf - Inf for an infinite x), and
  // codes scaled by up to 2^24 (a huge x overflows a partial sum): such a row takes the strict kernels, the other
  // row of a 2-row tile keeps its relaxed bits (found by a fuzzer in session 18).
  let eng: Engine, strm: Stream;
  beforeAll(async () => { eng = await Engine.create({ threads: 1, kernels: 'simd128' }); strm = new Stream(eng); });
  afterAll(() => eng.release());

  async function run(wdt: DataType, mode: 'strict' | 'relaxed', M: number, K: number, N: number, x: number[], w: number[], blocks: boolean): Promise<{ out: Float32Array; impl: string }> {
    const attr = new PrimitiveAttr().setAccumulationMode(mode);
    if (blocks) attr.setScales(ARG.WEIGHTS, 3, [32, 1], dt.e8m0);
    else attr.setScales(ARG.WEIGHTS, 2, []);
    const srcMd = memory.desc([M, K], dt.f32, tag.ab), dstMd = memory.desc([M, N], dt.f32, tag.ab);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([K, N], wdt, tag.any), dstMd, attr);
    const src = Memory.create(srcMd, eng).write(x);
    const plain = Memory.create(memory.desc([K, N], wdt, tag.ab), eng).write(w);
    const sc = blocks ? Memory.create(memory.desc([K / 32, N], dt.e8m0, tag.ab), eng).write(new Array<number>((K / 32) * N).fill(2))
      : Memory.create(memory.desc([N], dt.f32, tag.a), eng).write(new Array<number>(N).fill(0.5));
    const wei = Memory.create(pd.queryMd('weights')!, eng), dst = Memory.create(dstMd, eng);
    const r: Record<number, Memory> = { [ARG.FROM]: plain, [ARG.TO]: wei };
    const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    if (wei.desc.packed?.quant?.scales) r[ARG.ATTR_SCALES | ARG.WEIGHTS] = sc;
    else args[ARG.ATTR_SCALES | ARG.WEIGHTS] = sc;
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc)).execute(strm, r);
    new matmul.Primitive(pd).execute(strm, args);
    await strm.wait();
    const out = Float32Array.from(dst.read());
    [src, plain, sc, wei, dst].forEach((m) => m.free());
    return { out, impl: pd.implInfo };
  }

  for (const wdt of INTS) {
    it.each([false, true])(`${wdt}: Inf and 1e33 activations give strict's results; K blocks %s`, async (blocks) => {
      const K = 64, N = 16;
      const w = Array.from({ length: K * N }, (_, i) => 1 + (i % 3)); // positive codes of every type
      const fine = Array.from({ length: K }, (_, k) => Math.fround(Math.sin(k * 1.7) * 0.9));
      const inf = fine.slice(); inf[5] = Infinity;
      const big = new Array<number>(K).fill(1e33);
      for (const bad of [inf, big]) {
        const strict = await run(wdt, 'strict', 1, K, N, bad, w, blocks), relaxed = await run(wdt, 'relaxed', 1, K, N, bad, w, blocks);
        expect(relaxed.impl).toContain('+f32-gemm-1x16r');
        expect(Array.from(relaxed.out)).toEqual(Array.from(strict.out));
        expect(relaxed.out.every((v) => !Number.isNaN(v))).toBe(true);
        // a 2-row tile: the bad row strict, the fine row the bits it has alone (relaxed)
        const two = await run(wdt, 'relaxed', 2, K, N, [...bad, ...fine], w, blocks), alone = await run(wdt, 'relaxed', 1, K, N, fine, w, blocks);
        expect(Array.from(two.out.subarray(0, N))).toEqual(Array.from(strict.out));
        expect(Array.from(two.out.subarray(N))).toEqual(Array.from(alone.out));
      }
    });
  }
});
