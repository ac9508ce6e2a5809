/**
 * Backward of moe.routing and moe.combine against references written here: central finite differences
 * of a float64 forward (routing weights as a function of the logits with the selection held fixed;
 * weight-and-reduce as a function of its rows and weights) and the closed forms in float64. Both wasm
 * builds and the reference engine; the same bits for 1, 2 and 3 threads; bad ids / maps are errors
 * raised by stream.wait() with nothing written.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, dt, memory, moe, tag, type EngineOptions } from '../src/index.js';
import type { RoutingOptions } from '../src/primitives/moe/routing/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { mulberry32, randomF32, type Rng } from './workloads.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));

async function engine(o: EngineOptions): Promise<Engine> {
  const e = await Engine.create(o);
  engines.push(e);
  return e;
}

function f32(eng: Engine, dims: number[], v?: ArrayLike<number>): Memory {
  const m = Memory.create(memory.desc(dims, dt.f32, dims.length === 1 ? tag.a : tag.ab), eng);
  if (v) (m.values as Float32Array).set(Array.from(v));
  return m;
}

function s32(eng: Engine, dims: number[], v: ArrayLike<number>): Memory {
  const m = Memory.create(memory.desc(dims, dt.s32, dims.length === 1 ? tag.a : tag.ab), eng);
  (m.values as Int32Array).set(Array.from(v));
  return m;
}

// ---------------------------------------------------------------------------------------------------
// Routing: float64 forward with the selection fixed, differentiated numerically.

interface RouteCase {
  readonly name: string;
  readonly T: number;
  readonly E: number;
  readonly options: RoutingOptions;
}

/** Routing weights of token t's chosen ids as a float64 function of its logits. */
function weightsF64(x: readonly number[], ids: readonly number[], o: RoutingOptions): number[] {
  let score: number[];
  if ((o.scoring ?? 'softmax') === 'softmax') {
    const m = Math.max(...x);
    const ex = x.map((v) => Math.exp(v - m));
    const s = ex.reduce((a, b) => a + b, 0);
    score = ex.map((v) => v / s);
  } else {
    score = x.map((v) => 1 / (1 + Math.exp(-v)));
  }
  const raw = ids.map((e) => score[e]);
  const sum = raw.reduce((a, b) => a + b, 0);
  const scale = o.routedScalingFactor ?? 1;
  return raw.map((r) => scale * (o.renormalize ? r / (sum + Math.fround(o.renormalizeEps ?? 0)) : r));
}

/** d(sum_q dw_q * w_q) / d(logit_e) by central differences (h = 1e-6, float64). */
function routeGradFd(logits: Float32Array, ids: Int32Array, dw: Float32Array, T: number, E: number, k: number, o: RoutingOptions): Float64Array {
  const g = new Float64Array(T * E), h = 1e-6;
  for (let t = 0; t < T; t++) {
    const x = Array.from(logits.subarray(t * E, t * E + E));
    const id = Array.from(ids.subarray(t * k, t * k + k));
    const loss = (xs: number[]): number => weightsF64(xs, id, o).reduce((s, w, q) => s + w * dw[t * k + q], 0);
    for (let e = 0; e < E; e++) {
      const p = x.slice(), m = x.slice();
      p[e] += h;
      m[e] -= h;
      g[t * E + e] = (loss(p) - loss(m)) / (2 * h);
    }
  }
  return g;
}

const ROUTE_CASES: readonly RouteCase[] = [
  { name: 'softmax top-2', T: 7, E: 8, options: { topK: 2 } },
  { name: 'softmax top-3 renormalize, scale 2.5', T: 6, E: 16, options: { topK: 3, renormalize: true, routedScalingFactor: 2.5 } },
  { name: 'sigmoid top-4 renormalize, grouped', T: 5, E: 16, options: { topK: 4, scoring: 'sigmoid', renormalize: true, groupCount: 4, kGroup: 2 } },
  { name: 'sigmoid top-2 renormalize with eps 0.25 (w = s / (sum + eps))', T: 6, E: 8, options: { topK: 2, scoring: 'sigmoid', renormalize: true, renormalizeEps: 0.25 } },
  { name: 'softmax top-3 renormalize with eps 0.5', T: 5, E: 8, options: { topK: 3, renormalize: true, renormalizeEps: 0.5 } },
  { name: 'sigmoid top-2 no renormalize', T: 9, E: 6, options: { topK: 2, scoring: 'sigmoid' } },
  { name: 'k = E, renormalize (the renormalized softmax is the softmax)', T: 4, E: 5, options: { topK: 5, renormalize: true } },
  { name: 'T = 1, E = 256, top-8 grouped mode 1', T: 1, E: 256, options: { topK: 8, groupCount: 8, kGroup: 4, groupSelectMode: 1 } },
  { name: 'E = 1', T: 3, E: 1, options: { topK: 1 } },
];

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['relaxed 2T', { threads: 2, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.routing backward [%s]', (_n, opts: EngineOptions) => {
  for (const c of ROUTE_CASES) {
    it(`matches finite differences: ${c.name}`, async () => {
      const eng = await engine(opts);
      const strm = new Stream(eng);
      const rng = mulberry32(c.T * 131 + c.E);
      const k = c.options.topK;
      const logits = f32(eng, [c.T, c.E], randomF32(rng, c.T * c.E).map((v) => 3 * v));
      const pd = new moe.routing.PrimitiveDesc(eng, logits.desc, c.options);
      const ids = Memory.create(pd.queryMd('topk_ids')!, eng);
      const w = Memory.create(pd.queryMd('topk_weights')!, eng);
      new moe.routing.Primitive(pd).execute(strm, { [ARG.SRC]: logits, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: w });
      const bpd = new moe.routing.BackwardPrimitiveDesc(eng, pd);
      expect(bpd.implInfo).toBe(opts.kernels === 'none' ? 'ref:any' : `wasm:${opts.kernels}:moe-route-bwd`);
      const dw = f32(eng, [c.T, k], randomF32(rng, c.T * k));
      const dl = f32(eng, [c.T, c.E]);
      (dl.values as Float32Array).fill(Number.NaN);
      new moe.routing.BackwardPrimitive(bpd).execute(strm, { [ARG.SRC]: logits, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_DIFF_TOPK_WEIGHTS]: dw, [ARG.DIFF_SRC]: dl });
      await strm.wait();
      const ref = routeGradFd(logits.values as Float32Array, ids.values as Int32Array, dw.values as Float32Array, c.T, c.E, k, c.options);
      const got = dl.values as Float32Array;
      const scale = c.options.routedScalingFactor ?? 1;
      for (let i = 0; i < ref.length; i++) expect(Math.abs(got[i] - ref[i]), `logit ${i}: ${got[i]} vs ${ref[i]}`).toBeLessThanOrEqual(2e-6 * scale + 1e-6 * Math.abs(ref[i]));
      if ((c.options.scoring ?? 'softmax') === 'sigmoid') {
        // sigmoid: only the chosen logits get a gradient
        const idv = ids.values as Int32Array;
        for (let t = 0; t < c.T; t++) for (let e = 0; e < c.E; e++) if (!Array.from(idv.subarray(t * k, t * k + k)).includes(e)) expect(got[t * c.E + e]).toBe(0);
      }
    });
  }

  it('bad ids are errors at wait() with nothing written; a custom routing function has no backward', async () => {
    const eng = await engine(opts);
    const strm = new Stream(eng);
    const T = 4, E = 6, k = 2;
    const logits = f32(eng, [T, E], randomF32(mulberry32(5), T * E));
    const pd = new moe.routing.PrimitiveDesc(eng, logits.desc, { topK: k });
    const bwd = new moe.routing.BackwardPrimitive(new moe.routing.BackwardPrimitiveDesc(eng, pd));
    const dw = f32(eng, [T, k], randomF32(mulberry32(6), T * k));
    const dl = f32(eng, [T, E]);
    for (const [ids, msg] of [
      [[0, 1, 2, 3, 4, 6, 0, 1], 'ARG.MOE_TOPK_IDS[2, 1] = 6 is out of range [0, E = 6)'],
      [[0, 1, 2, 3, 5, 5, 0, 1], 'token 2 chooses expert 5 twice'],
      [[0, 1, -1, 3, 4, 5, 0, 1], 'ARG.MOE_TOPK_IDS[1, 0] = -1 is out of range'],
    ] as const) {
      (dl.values as Float32Array).fill(9);
      bwd.execute(strm, { [ARG.SRC]: logits, [ARG.MOE_TOPK_IDS]: s32(eng, [T, k], ids), [ARG.MOE_DIFF_TOPK_WEIGHTS]: dw, [ARG.DIFF_SRC]: dl });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', msg);
      expect((dl.values as Float32Array).every((v) => v === 9)).toBe(true);
    }
    expectDnnlError(() => bwd.execute(strm, { [ARG.SRC]: logits, [ARG.MOE_TOPK_IDS]: s32(eng, [T, k], [0, 1, 2, 3, 4, 5, 0, 1]), [ARG.MOE_DIFF_TOPK_WEIGHTS]: f32(eng, [T, E]), [ARG.DIFF_SRC]: dl }), 'invalid_arguments', 'ARG.MOE_DIFF_TOPK_WEIGHTS');
    const custom = new moe.routing.PrimitiveDesc(eng, logits.desc, { topK: k, customRoutingFunction: () => ({ ids: new Int32Array(T * k), weights: new Float32Array(T * k) }) });
    expectDnnlError(() => new moe.routing.BackwardPrimitiveDesc(eng, custom), 'unimplemented', 'customRoutingFunction has no gradient');
  });
});

it('moe.routing backward: the same bits for 1, 2 and 3 threads and both builds agree with the reference to f32 rounding', async () => {
  const T = 61, E = 64, k = 6;
  const rng = mulberry32(99);
  const lv = randomF32(rng, T * E).map((v) => 4 * v), dwv = randomF32(rng, T * k);
  const outs: Float32Array[] = [];
  for (const o of [{ threads: 1, kernels: 'simd128' }, { threads: 2, kernels: 'simd128' }, { threads: 3, kernels: 'simd128' }] as const) {
    const eng = await engine(o);
    const strm = new Stream(eng);
    const logits = f32(eng, [T, E], lv);
    const pd = new moe.routing.PrimitiveDesc(eng, logits.desc, { topK: k, renormalize: true, routedScalingFactor: 1.5 });
    const ids = Memory.create(pd.queryMd('topk_ids')!, eng), w = Memory.create(pd.queryMd('topk_weights')!, eng);
    new moe.routing.Primitive(pd).execute(strm, { [ARG.SRC]: logits, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: w });
    const dl = f32(eng, [T, E]);
    new moe.routing.BackwardPrimitive(new moe.routing.BackwardPrimitiveDesc(eng, pd)).execute(strm, { [ARG.SRC]: logits, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_DIFF_TOPK_WEIGHTS]: f32(eng, [T, k], dwv), [ARG.DIFF_SRC]: dl });
    await strm.wait();
    outs.push((dl.values as Float32Array).slice());
  }
  expect(outs[1]).toEqual(outs[0]);
  expect(outs[2]).toEqual(outs[0]);
  expect(outs[0].some((v) => v !== 0)).toBe(true);
});

// ---------------------------------------------------------------------------------------------------
// Combine (weight-and-reduce) backward.

interface Maps {
  readonly tokenIndex: Int32Array;
  readonly tokenKs: Int32Array;
  readonly rowOf: Int32Array;
  readonly rows: number;
}

/** Routed rows sorted by (expert, token, slot); `dropEvery` slots are not routed here; `pad` padding rows at the end. */
function routedMaps(rng: Rng, T: number, k: number, E: number, dropEvery: number, pad: number, skewTo?: number): Maps {
  const items: [number, number, number][] = [];
  for (let t = 0; t < T; t++) {
    const used = new Set<number>();
    for (let s = 0; s < k; s++) {
      let e = skewTo ?? Math.floor(rng() * E);
      while (used.has(e)) e = (e + 1) % E;
      used.add(e);
      if (dropEvery > 0 && (t * k + s) % dropEvery === dropEvery - 1) continue;
      items.push([e, t, s]);
    }
  }
  items.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  const rows = items.length + pad;
  const tokenIndex = new Int32Array(rows).fill(-1), tokenKs = new Int32Array(rows), rowOf = new Int32Array(T * k).fill(-1);
  items.forEach(([, t, s], r) => { tokenIndex[r] = t; tokenKs[r] = s; rowOf[t * k + s] = r; });
  return { tokenIndex, tokenKs, rowOf, rows };
}

interface CombineCase {
  readonly name: string;
  readonly T: number;
  readonly k: number;
  readonly E: number;
  readonly N: number;
  readonly dropEvery: number;
  readonly pad: number;
  readonly skewTo?: number;
}

const COMBINE_CASES: readonly CombineCase[] = [
  { name: 'random, N = 37', T: 13, k: 3, E: 8, N: 37, dropEvery: 0, pad: 0 },
  { name: 'unrouted slots and padding rows', T: 11, k: 2, E: 4, N: 9, dropEvery: 5, pad: 3 },
  { name: 'all tokens to one expert', T: 17, k: 1, E: 6, N: 16, dropEvery: 0, pad: 0, skewTo: 2 },
  { name: 'k = E', T: 5, k: 4, E: 4, N: 5, dropEvery: 0, pad: 0 },
  { name: 'T = 1, N = 1', T: 1, k: 2, E: 3, N: 1, dropEvery: 0, pad: 0 },
];

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['simd128 2T', { threads: 2, kernels: 'simd128' }],
  ['relaxed 3T', { threads: 3, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.combine backward [%s]', (_n, opts: EngineOptions) => {
  for (const c of COMBINE_CASES) {
    for (const input of ['routed', 'scattered'] as const) {
      for (const weighted of input === 'routed' ? [true, false] : [true, false]) {
        it(`${c.name}: ${input}, ${weighted ? 'weighted' : 'unweighted'}`, async () => {
          const eng = await engine(opts);
          const strm = new Stream(eng);
          const rng = mulberry32(c.T * 7 + c.N + (weighted ? 1 : 0));
          const m = routedMaps(rng, c.T, c.k, c.E, c.dropEvery, c.pad, c.skewTo);
          const rows = input === 'routed' ? m.rows : c.T * c.k;
          const y = f32(eng, [rows, c.N], randomF32(rng, rows * c.N));
          const w = f32(eng, [c.T, c.k], randomF32(rng, c.T * c.k));
          const dOut = f32(eng, [c.T, c.N], randomF32(rng, c.T * c.N));
          const fwd = new moe.combine.PrimitiveDesc(eng, { tokens: c.T, topK: c.k, input, src: y.desc, dst: dOut.desc, weighted });
          const bpd = new moe.combine.BackwardPrimitiveDesc(eng, fwd);
          expect(bpd.queryMd('diff_topk_weights') !== undefined).toBe(weighted);
          const dY = f32(eng, [rows, c.N]);
          (dY.values as Float32Array).fill(Number.NaN);
          const dW = weighted ? f32(eng, [c.T, c.k]) : undefined;
          dW?.values.fill(Number.NaN);
          const args: Record<number, Memory> = { [ARG.DIFF_DST]: dOut, [ARG.DIFF_SRC]: dY };
          const put = (id: number, what: Parameters<typeof bpd.queryMd>[0], mem: () => Memory): void => { if (bpd.queryMd(what)) args[id] = mem(); };
          put(ARG.SRC, 'src', () => y);
          put(ARG.MOE_TOPK_WEIGHTS, 'topk_weights', () => w);
          put(ARG.MOE_ROW_OF, 'row_of', () => s32(eng, [c.T, c.k], m.rowOf));
          put(ARG.MOE_TOKEN_INDEX, 'token_index', () => s32(eng, [rows], m.tokenIndex));
          put(ARG.MOE_TOKEN_KS, 'token_ks', () => s32(eng, [rows], m.tokenKs));
          if (dW) args[ARG.MOE_DIFF_TOPK_WEIGHTS] = dW;
          new moe.combine.BackwardPrimitive(bpd).execute(strm, args);
          await strm.wait();
          // float64: L = <dOut, out>, out[t] = sum_s w[t,s] y[row(t,s)] over routed slots.
          const yv = y.values as Float32Array, wv = w.values as Float32Array, dv = dOut.values as Float32Array;
          const rowFor = (t: number, s: number): number => (m.rowOf[t * c.k + s] < 0 ? -1 : input === 'routed' ? m.rowOf[t * c.k + s] : t * c.k + s);
          const refDy = new Float64Array(rows * c.N);
          for (let t = 0; t < c.T; t++) for (let s = 0; s < c.k; s++) {
            const r = rowFor(t, s);
            if (r >= 0) for (let n = 0; n < c.N; n++) refDy[r * c.N + n] = (weighted ? wv[t * c.k + s] : 1) * dv[t * c.N + n];
          }
          // elementwise products: exact in f32 after one rounding
          expect(Array.from(dY.values as Float32Array)).toEqual(Array.from(refDy, (v) => Math.fround(v)));
          if (dW) {
            const got = dW.values as Float32Array;
            for (let t = 0; t < c.T; t++) for (let s = 0; s < c.k; s++) {
              const r = rowFor(t, s);
              let ref = 0, mag = 0;
              if (r >= 0) for (let n = 0; n < c.N; n++) { ref += dv[t * c.N + n] * yv[r * c.N + n]; mag += Math.abs(dv[t * c.N + n] * yv[r * c.N + n]); }
              // finite difference of L in w[t, s] (L is linear in w: exact up to rounding)
              const h = 0.5;
              const lossAt = (dw: number): number => { let l = 0; if (r >= 0) for (let n = 0; n < c.N; n++) l += dv[t * c.N + n] * (wv[t * c.k + s] + dw) * yv[r * c.N + n]; return l; };
              const fd = (lossAt(h) - lossAt(-h)) / (2 * h);
              expect(Math.abs(got[t * c.k + s] - ref)).toBeLessThanOrEqual(1e-6 * mag + 1e-30);
              expect(Math.abs(got[t * c.k + s] - fd)).toBeLessThanOrEqual(1e-6 * mag + 1e-12);
            }
          }
        });
      }
    }
  }

  it('bad maps are errors at wait() with nothing written; dst must be f32', async () => {
    const eng = await engine(opts);
    const strm = new Stream(eng);
    const T = 6, k = 2, N = 8;
    const m = routedMaps(mulberry32(3), T, k, 4, 0, 0);
    const y = f32(eng, [m.rows, N], randomF32(mulberry32(4), m.rows * N));
    const dOut = f32(eng, [T, N], randomF32(mulberry32(5), T * N));
    const fwd = new moe.combine.PrimitiveDesc(eng, { tokens: T, topK: k, src: y.desc, dst: dOut.desc });
    const bwd = new moe.combine.BackwardPrimitive(new moe.combine.BackwardPrimitiveDesc(eng, fwd));
    const dY = f32(eng, [m.rows, N]), dW = f32(eng, [T, k]);
    const run = (ti: Int32Array, ks: Int32Array, ro: Int32Array): Promise<void> => {
      dY.values.fill(5);
      dW.values.fill(5);
      bwd.execute(strm, {
        [ARG.DIFF_DST]: dOut, [ARG.SRC]: y, [ARG.MOE_TOPK_WEIGHTS]: f32(eng, [T, k], new Float32Array(T * k).fill(0.5)), [ARG.MOE_ROW_OF]: s32(eng, [T, k], ro),
        [ARG.MOE_TOKEN_INDEX]: s32(eng, [m.rows], ti), [ARG.MOE_TOKEN_KS]: s32(eng, [m.rows], ks), [ARG.DIFF_SRC]: dY, [ARG.MOE_DIFF_TOPK_WEIGHTS]: dW,
      });
      return strm.wait();
    };
    const badTi = m.tokenIndex.slice();
    badTi[3] = T;
    await expectDnnlReject(run(badTi, m.tokenKs, m.rowOf), 'invalid_arguments', `ARG.MOE_TOKEN_INDEX[3] = ${T}`);
    expect(dY.values.every((v) => v === 5) && dW.values.every((v) => v === 5)).toBe(true);
    const badKs = m.tokenKs.slice();
    badKs[0] = k;
    await expectDnnlReject(run(m.tokenIndex, badKs, m.rowOf), 'invalid_arguments', `ARG.MOE_TOKEN_KS[0] = ${k}`);
    expect(dY.values.every((v) => v === 5) && dW.values.every((v) => v === 5)).toBe(true);
    const badRo = m.rowOf.slice();
    badRo[1] = m.rows;
    await expectDnnlReject(run(m.tokenIndex, m.tokenKs, badRo), 'invalid_arguments', `ARG.MOE_ROW_OF[0, 1] = ${m.rows}`);
    expect(dY.values.every((v) => v === 5) && dW.values.every((v) => v === 5)).toBe(true);
    const bf = new moe.combine.PrimitiveDesc(eng, { tokens: T, topK: k, src: y.desc, dst: memory.desc([T, N], dt.bf16, tag.ab) });
    expectDnnlError(() => new moe.combine.BackwardPrimitiveDesc(eng, bf), 'unimplemented', 'diff_dst data type bf16');
  });
});
