/**
 * MoE layer backward against central finite differences of a float64 forward written here (the
 * selection held at the forward's choice; routing weights, GEMMs, GLU, biases and the weighted sum
 * all differentiated numerically): gradients of hidden, router logits, w13, w2 and both biases. GLU
 * kinds and layouts, softmax / sigmoid routing with renormalize and scaling, empty experts, every
 * token on one expert, E = 1, K and I not multiples of the tile; the same bits for 1, 2 and 3 threads;
 * the training forward gives the inference forward's output; rule violations are errors.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, dt, memory, moe, tag, type EngineOptions, type GluAlg, type GluLayout } from '../src/index.js';
import type { LayerConfig } from '../src/primitives/moe/layer/index.js';
import { expectDnnlError } from './helpers.js';
import { gluExpected } from './quant_helpers.js';
import { mulberry32, randomF32 } from './workloads.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));

const sig = (x: number): number => 1 / (1 + Math.exp(-x));
interface Params { hidden: Float64Array; logits: Float64Array; w13: Float64Array; w2: Float64Array; b13?: Float64Array; b2?: Float64Array }
interface Shape { T: number; E: number; k: number; K: number; I: number; alg: GluAlg; layout: GluLayout; scoring: 'softmax' | 'sigmoid'; renormalize: boolean; scale: number }

/** Float64 layer output with the selection fixed to `ids`. */
function forwardF64(s: Shape, p: Params, ids: Int32Array): Float64Array {
  const { T, E, k, K, I } = s;
  const out = new Float64Array(T * K), h = new Float64Array(2 * I), act = new Float64Array(I);
  for (let t = 0; t < T; t++) {
    const x = Array.from(p.logits.subarray(t * E, t * E + E));
    let score: number[];
    if (s.scoring === 'softmax') {
      const m = Math.max(...x), ex = x.map((v) => Math.exp(v - m)), sum = ex.reduce((a, b) => a + b, 0);
      score = ex.map((v) => v / sum);
    } else score = x.map(sig);
    const raw = Array.from(ids.subarray(t * k, t * k + k), (e) => score[e]);
    const rs = raw.reduce((a, b) => a + b, 0);
    for (let q = 0; q < k; q++) {
      const e = ids[t * k + q];
      const w = s.scale * (s.renormalize ? raw[q] / rs : raw[q]);
      for (let c = 0; c < 2 * I; c++) {
        let a = p.b13 ? p.b13[e * 2 * I + c] : 0;
        for (let i = 0; i < K; i++) a += p.hidden[t * K + i] * p.w13[e * K * 2 * I + i * 2 * I + c];
        h[c] = a;
      }
      for (let j = 0; j < I; j++) act[j] = gluExpected({ alg: s.alg, layout: s.layout }, 2 * I, j, (c) => h[c]);
      for (let n = 0; n < K; n++) {
        let y = p.b2 ? p.b2[e * K + n] : 0;
        for (let j = 0; j < I; j++) y += act[j] * p.w2[e * I * K + j * K + n];
        out[t * K + n] += w * y;
      }
    }
  }
  return out;
}

/** d<dOut, layer(p)>/d(p.name) by central differences. */
function fdGrad(s: Shape, p: Params, ids: Int32Array, dOut: Float32Array, name: keyof Params): Float64Array {
  const v = p[name]!, g = new Float64Array(v.length), hstep = 1e-6;
  const loss = (): number => forwardF64(s, p, ids).reduce((a, o, i) => a + o * dOut[i], 0);
  for (let i = 0; i < v.length; i++) {
    const x0 = v[i];
    v[i] = x0 + hstep;
    const lp = loss();
    v[i] = x0 - hstep;
    const lm = loss();
    v[i] = x0;
    g[i] = (lp - lm) / (2 * hstep);
  }
  return g;
}

interface Run { readonly grads: Record<string, Float32Array>; readonly out: Float32Array; readonly inferenceOut: Float32Array; readonly ids: Int32Array; readonly params: Params; readonly dOut: Float32Array }

async function runLayer(eng: Engine, s: Shape, bias: boolean, seed: number, skewTo?: number): Promise<Run> {
  const { T, E, k, K, I } = s;
  const rng = mulberry32(seed);
  const params: Params = {
    hidden: Float64Array.from(randomF32(rng, T * K)),
    logits: Float64Array.from(randomF32(rng, T * E), (v, i) => 2 * v + (skewTo !== undefined && i % E === skewTo ? 20 : 0)),
    w13: Float64Array.from(randomF32(rng, E * K * 2 * I), (v) => v * 0.8),
    w2: Float64Array.from(randomF32(rng, E * I * K), (v) => v * 0.8),
    ...(bias ? { b13: Float64Array.from(randomF32(rng, E * 2 * I), (v) => 0.3 * v), b2: Float64Array.from(randomF32(rng, E * K), (v) => 0.3 * v) } : {}),
  };
  const dOut = Float32Array.from(randomF32(rng, T * K));
  const config: LayerConfig = {
    tokens: T, hidden: K, intermediate: I, experts: E, topK: k, bias,
    routing: { scoring: s.scoring, renormalize: s.renormalize, routedScalingFactor: s.scale }, glu: { alg: s.alg, layout: s.layout },
  };
  const strm = new Stream(eng);
  const pd = new moe.layer.PrimitiveDesc(eng, { ...config, propKind: 'forward_training' });
  const fwd = new moe.layer.Primitive(pd);
  const f32 = (md: ReturnType<typeof memory.desc>, v?: ArrayLike<number>): Memory => {
    const m = Memory.create(md, eng);
    if (v) (m.values as Float32Array).set(Array.from(v));
    return m;
  };
  const a: Record<number, Memory> = {
    [ARG.SRC]: f32(pd.queryMd('hidden')!, params.hidden), [ARG.MOE_ROUTER_LOGITS]: f32(pd.queryMd('logits')!, params.logits),
    [ARG.WEIGHTS]: f32(pd.queryMd('w13')!, params.w13), [ARG.WEIGHTS_1]: f32(pd.queryMd('w2')!, params.w2), [ARG.DST]: f32(pd.queryMd('dst')!),
  };
  if (bias) {
    a[ARG.BIAS] = f32(pd.queryMd('w13_bias')!, params.b13);
    a[ARG.MOE_W2_BIAS] = f32(pd.queryMd('w2_bias')!, params.b2);
  }
  fwd.execute(strm, a);
  // The inference forward on the same inputs (packed weights by default: give it plain ones).
  const ipd = new moe.layer.PrimitiveDesc(eng, { ...config, weights: { w13: pd.queryMd('w13')!, w2: pd.queryMd('w2')! } });
  const inf = new moe.layer.Primitive(ipd);
  const infOut = f32(pd.queryMd('dst')!);
  inf.execute(strm, { ...a, [ARG.DST]: infOut });
  const bpd = new moe.layer.BackwardPrimitiveDesc(eng, pd);
  const bwd = new moe.layer.BackwardPrimitive(bpd, fwd);
  const outs: Record<string, Memory> = {
    diff_src: f32(bpd.queryMd('diff_src')!), diff_logits: f32(bpd.queryMd('diff_logits')!), diff_w13: f32(bpd.queryMd('diff_w13')!), diff_w2: f32(bpd.queryMd('diff_w2')!),
    ...(bias ? { diff_w13_bias: f32(bpd.queryMd('diff_w13_bias')!), diff_w2_bias: f32(bpd.queryMd('diff_w2_bias')!) } : {}),
  };
  for (const m of Object.values(outs)) m.values.fill(Number.NaN); // every element must be written
  bwd.execute(strm, {
    [ARG.DIFF_DST]: f32(bpd.queryMd('diff_dst')!, dOut), [ARG.MOE_ROUTER_LOGITS]: a[ARG.MOE_ROUTER_LOGITS], [ARG.WEIGHTS]: a[ARG.WEIGHTS], [ARG.WEIGHTS_1]: a[ARG.WEIGHTS_1],
    [ARG.DIFF_SRC]: outs.diff_src, [ARG.MOE_DIFF_ROUTER_LOGITS]: outs.diff_logits, [ARG.DIFF_WEIGHTS]: outs.diff_w13, [ARG.DIFF_WEIGHTS_1]: outs.diff_w2,
    [ARG.DIFF_BIAS]: outs.diff_w13_bias, [ARG.MOE_DIFF_W2_BIAS]: outs.diff_w2_bias,
  });
  await strm.wait();
  const grads: Record<string, Float32Array> = {};
  for (const [n, m] of Object.entries(outs)) grads[n] = (m.values as Float32Array).slice();
  const run: Run = {
    grads, out: (a[ARG.DST].values as Float32Array).slice(), inferenceOut: (infOut.values as Float32Array).slice(),
    ids: (fwd.workspace.topkIds.values as Int32Array).slice(), params, dOut,
  };
  bwd.destroy();
  fwd.destroy();
  inf.destroy();
  return run;
}

const GRAD_OF: Readonly<Record<string, keyof Params>> = {
  diff_src: 'hidden', diff_logits: 'logits', diff_w13: 'w13', diff_w2: 'w2', diff_w13_bias: 'b13', diff_w2_bias: 'b2',
};

function checkAgainstFd(s: Shape, r: Run): void {
  for (const [name, p] of Object.entries(GRAD_OF)) {
    const got = r.grads[name];
    if (!got) continue;
    const ref = fdGrad(s, r.params, r.ids, r.dOut, p);
    const scale = ref.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    for (let i = 0; i < ref.length; i++) expect(Math.abs(got[i] - ref[i]), `${name}[${i}]: ${got[i]} vs ${ref[i]} (scale ${scale})`).toBeLessThanOrEqual(3e-4 * scale + 1e-6);
  }
}

const CASES: readonly (Shape & { name: string; bias: boolean; skewTo?: number })[] = [
  { name: 'swiglu halves, softmax renormalize, biases, empty experts', T: 5, E: 6, k: 2, K: 9, I: 5, alg: 'glu_swiglu', layout: 'halves', scoring: 'softmax', renormalize: true, scale: 1, bias: true },
  { name: 'geglu_tanh interleaved, sigmoid, scale 2.5', T: 4, E: 4, k: 2, K: 6, I: 7, alg: 'glu_geglu_tanh', layout: 'interleaved', scoring: 'sigmoid', renormalize: false, scale: 2.5, bias: false },
  { name: 'geglu_erf halves, every token on expert 2 (k = 1)', T: 6, E: 3, k: 1, K: 5, I: 3, alg: 'glu_geglu_erf', layout: 'halves', scoring: 'softmax', renormalize: false, scale: 1, bias: true, skewTo: 2 },
  { name: 'swiglu_oai blocks32, E = 1, T = 1', T: 1, E: 1, k: 1, K: 4, I: 32, alg: 'glu_swiglu_oai', layout: 'blocks32', scoring: 'softmax', renormalize: true, scale: 1, bias: true },
  { name: 'k = E, sigmoid renormalize', T: 3, E: 3, k: 3, K: 5, I: 4, alg: 'glu_swiglu', layout: 'interleaved', scoring: 'sigmoid', renormalize: true, scale: 1, bias: false },
];

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.layer backward [%s]', (_n, opts: EngineOptions) => {
  for (const c of CASES) {
    it(`matches finite differences: ${c.name}`, async () => {
      const eng = await Engine.create(opts);
      engines.push(eng);
      const r = await runLayer(eng, c, c.bias, c.T * 31 + c.I, c.skewTo);
      if (c.skewTo !== undefined) expect(Array.from(r.ids).every((e) => e === c.skewTo)).toBe(true);
      for (const g of Object.values(r.grads)) expect(g.every((v) => Number.isFinite(v))).toBe(true);
      checkAgainstFd(c, r);
      // the training forward computes the inference forward's output (the same bits on the kernels)
      if (opts.kernels !== 'none') expect(Array.from(r.out)).toEqual(Array.from(r.inferenceOut));
      else for (let i = 0; i < r.out.length; i++) expect(r.out[i]).toBeCloseTo(r.inferenceOut[i], 5);
    });
  }
});

it('moe.layer backward: the same bits for 1, 2 and 3 threads (MoE-like shape with empty experts)', async () => {
  const s: Shape = { T: 37, E: 16, k: 4, K: 33, I: 19, alg: 'glu_swiglu', layout: 'halves', scoring: 'softmax', renormalize: true, scale: 1 };
  const runs: Run[] = [];
  for (const threads of [1, 2, 3]) {
    const eng = await Engine.create({ threads, kernels: 'simd128' });
    engines.push(eng);
    runs.push(await runLayer(eng, s, true, 5));
  }
  for (const r of runs.slice(1)) for (const [n, g] of Object.entries(runs[0].grads)) expect(Array.from(r.grads[n]), n).toEqual(Array.from(g));
  expect(runs[0].grads.diff_w13.some((v) => v !== 0)).toBe(true);
});

it('moe.layer backward: rules', async () => {
  const eng = await Engine.create({ threads: 1 });
  engines.push(eng);
  const base: LayerConfig = { tokens: 4, hidden: 8, intermediate: 4, experts: 4, topK: 2 };
  const inf = new moe.layer.PrimitiveDesc(eng, base);
  expectDnnlError(() => new moe.layer.BackwardPrimitiveDesc(eng, inf), 'unimplemented', "propKind: 'forward_training'");
  expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, propKind: 'forward_training', gemm1: 'gather' }), 'invalid_arguments', "leave gemm1 unset or 'permute'");
  expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, propKind: 'forward_training', combine: 'fused_scatter' }), 'invalid_arguments', "leave combine unset or 'weight_and_reduce'");
  expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, propKind: 'forward_training', sharedExpert: { intermediate: 4 } }), 'unimplemented', 'shared expert');
  expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, propKind: 'forward_training', quant: 'w8a8_dynamic' }), 'unimplemented', 'moe.layer: forward_training does not support quant');
  expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, propKind: 'forward_training', weights: { w13: memory.desc([4, 8, 8], dt.f32, tag.any), w2: memory.desc([4, 4, 8], dt.f32, tag.any) } }), 'unimplemented', 'needs plain f32 abc w13');
  expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, propKind: 'backward' as 'forward_training' }), 'invalid_arguments', 'propKind must be');
  const pd = new moe.layer.PrimitiveDesc(eng, { ...base, propKind: 'forward_training' });
  const fwd = new moe.layer.Primitive(pd);
  const other = new moe.layer.Primitive(pd);
  const bpd = new moe.layer.BackwardPrimitiveDesc(eng, pd);
  expectDnnlError(() => new moe.layer.BackwardPrimitive(bpd, new moe.layer.Primitive(inf)), 'invalid_arguments', "forward must be the moe.layer.Primitive of the pd's forward hint");
  const bwd = new moe.layer.BackwardPrimitive(bpd, fwd);
  expect(new moe.layer.BackwardPrimitive(bpd, other).forward).toBe(other);
  const strm = new Stream(eng);
  const m = (md: ReturnType<typeof memory.desc>): Memory => Memory.create(md, eng);
  const args: Record<number, Memory> = {
    [ARG.DIFF_DST]: m(bpd.queryMd('diff_dst')!), [ARG.MOE_ROUTER_LOGITS]: m(pd.queryMd('logits')!), [ARG.WEIGHTS]: m(pd.queryMd('w13')!), [ARG.WEIGHTS_1]: m(pd.queryMd('w2')!),
    [ARG.DIFF_SRC]: m(bpd.queryMd('diff_src')!), [ARG.MOE_DIFF_ROUTER_LOGITS]: m(bpd.queryMd('diff_logits')!), [ARG.DIFF_WEIGHTS]: m(bpd.queryMd('diff_w13')!),
  };
  expectDnnlError(() => bwd.execute(strm, args), 'invalid_arguments', 'missing argument ARG.DIFF_WEIGHTS_1');
  expectDnnlError(() => bwd.execute(strm, { ...args, [ARG.DIFF_WEIGHTS_1]: m(bpd.queryMd('diff_w13')!) }), 'invalid_arguments', 'ARG.DIFF_WEIGHTS_1 descriptor');
  // Before the forward ran, its workspace holds no routing (with topK = 1 the backward once returned zeros).
  const full: Record<number, Memory> = { ...args, [ARG.DIFF_WEIGHTS_1]: m(bpd.queryMd('diff_w2')!) };
  expectDnnlError(() => bwd.execute(strm, full), 'invalid_arguments', 'the forward moe.layer.Primitive has not been executed');
  const logits = full[ARG.MOE_ROUTER_LOGITS];
  logits.write(Float32Array.from({ length: logits.elementCount }, (_, i) => Math.sin(i)));
  fwd.execute(strm, { [ARG.SRC]: m(pd.queryMd('hidden')!), [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: full[ARG.WEIGHTS], [ARG.WEIGHTS_1]: full[ARG.WEIGHTS_1], [ARG.DST]: m(pd.queryMd('dst')!) });
  bwd.execute(strm, full);
  await strm.wait();
});
