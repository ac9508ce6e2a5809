/**
 * The whole MoE layer (moe.layer) on the gpu engine: every stage on the device, one submit, the
 * same routing as the cpu engine (ids exactly), the output against the float64 layer reference given
 * that routing, and against the cpu layer for the quantized variants.
 */
import { describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, GpuEngine, GpuMemory, Memory, Stream, dt, memory, moe, tag, type DataType } from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { data, refMoeLayer, type Data, type Shape } from './moe_layer_reference.js';
import { mulberry32, randomF32 } from './workloads.js';
import { runQwen3Layer } from '../examples/moe_layer_gpu.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });


type AnyEngine = Engine | GpuEngine;
type AnyMemory = Memory | GpuMemory;

function mem(eng: AnyEngine, dims: readonly number[], v: ArrayLike<number>, t: DataType = dt.f32): AnyMemory {
  const m = Memory.create(memory.desc([...dims], t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc), eng);
  m.write(Float64Array.from(v));
  return m;
}

type Config = Omit<moe.layer.LayerConfig, 'tokens' | 'hidden' | 'intermediate' | 'experts' | 'topK'>;

interface Extra { readonly scales13?: { dims: number[]; v: ArrayLike<number> }; readonly scales2?: { dims: number[]; v: ArrayLike<number> }; readonly map?: Int32Array }

interface Run { out: Float32Array; ids: Int32Array; w: Float32Array; stages: string[]; impl: string[] }

/** Runs the layer on `eng` with plain weights (`wdt` codes when quantized); `ids` replaces the routing's top-k ids. */
async function runLayer(eng: AnyEngine, s: Shape, d: Data, c: Config = {}, wdt: DataType = dt.f32, x: Extra = {}, ids?: Int32Array): Promise<Run> {
  const strm = new Stream(eng);
  const G = c.localExperts ?? s.E;
  const weights = { w13: memory.desc([G, s.K, 2 * s.I], wdt, tag.abc), w2: memory.desc([G, s.I, s.K], wdt, tag.abc) };
  const pd = new moe.layer.PrimitiveDesc(eng, { tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, routing: { renormalize: true }, weights, ...c });
  const layer = new moe.layer.Primitive(pd);
  const out = Memory.create(pd.queryMd('dst')!, eng);
  const args: Record<number, AnyMemory> = {
    [ARG.SRC]: mem(eng, [s.T, s.K], d.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(eng, [s.T, s.E], d.logits),
    [ARG.WEIGHTS]: mem(eng, [G, s.K, 2 * s.I], d.w13.subarray(0, G * s.K * 2 * s.I), wdt), [ARG.WEIGHTS_1]: mem(eng, [G, s.I, s.K], d.w2.subarray(0, G * s.I * s.K), wdt), [ARG.DST]: out,
  };
  if (c.bias) {
    args[ARG.BIAS] = mem(eng, [G, 2 * s.I], d.b13.subarray(0, G * 2 * s.I));
    args[ARG.MOE_W2_BIAS] = mem(eng, [G, s.K], d.b2.subarray(0, G * s.K));
  }
  if (c.sharedExpert) {
    const Is = c.sharedExpert.intermediate;
    args[ARG.MOE_SHARED_W13] = mem(eng, [s.K, 2 * Is], d.w13.subarray(0, s.K * 2 * Is));
    args[ARG.MOE_SHARED_W2] = mem(eng, [Is, s.K], d.w2.subarray(0, Is * s.K));
  }
  if (x.scales13) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = mem(eng, x.scales13.dims, x.scales13.v);
  if (x.scales2) args[ARG.ATTR_SCALES | ARG.WEIGHTS_1] = mem(eng, x.scales2.dims, x.scales2.v);
  if (x.map) args[ARG.MOE_EXPERT_MAP] = mem(eng, [s.E], x.map, dt.s32);
  const execute = (a: Record<number, AnyMemory>): void => {
    if (eng.kind === 'gpu') (layer as unknown as moe.layer.Primitive<GpuEngine>).execute(strm, a as Record<number, GpuMemory>);
    else (layer as unknown as moe.layer.Primitive).execute(strm, a as Record<number, Memory>);
  };
  if (ids) {
    const l = layer as unknown as moe.layer.Primitive<GpuEngine> & moe.layer.Primitive;
    l.stage('route').execute(strm, args as Record<number, never>);
    await strm.wait();
    layer.workspace.topkIds.write(ids);
    for (const st of l.stages.slice(1)) st.execute(strm, args as Record<number, never>);
  } else execute(args);
  await strm.wait();
  const r: Run = {
    out: Float32Array.from(await out.read()), ids: Int32Array.from(await layer.workspace.topkIds.read()), w: Float32Array.from(await layer.workspace.topkWeights.read()),
    stages: layer.stages.map((st) => st.name), impl: layer.stages.map((st) => st.implInfo),
  };
  layer.destroy();
  return r;
}

function checkRef(s: Shape, d: Data, r: Run, c: Config = {}, G = s.E): void {
  const Is = c.sharedExpert?.intermediate;
  const ref = refMoeLayer({
    T: s.T, K: s.K, I: s.I, k: s.k, hidden: d.hidden, ids: r.ids, weights: r.w, w13: d.w13.subarray(0, G * s.K * 2 * s.I), w2: d.w2.subarray(0, G * s.I * s.K),
    b13: c.bias ? d.b13 : undefined, b2: c.bias ? d.b2 : undefined, glu: { alg: 'glu_swiglu', layout: 'halves' },
    shared: Is ? { Is, w13: d.w13.subarray(0, s.K * 2 * Is), w2: d.w2.subarray(0, Is * s.K) } : undefined,
    routingWeight: c.routingWeight,
  });
  let worst = 0;
  for (let i = 0; i < ref.value.length; i++) worst = Math.max(worst, Math.abs(r.out[i] - ref.value[i]) / (ref.mag[i] + 1e-30));
  expect(worst).toBeLessThan(2e-5);
}

/** The gpu run against the cpu run: the same routing (ids exactly, weights to f32 exp accuracy). */
function sameRouting(g: Run, c: Run): void {
  expect(Array.from(g.ids)).toEqual(Array.from(c.ids));
  for (let i = 0; i < c.w.length; i++) expect(Math.abs(g.w[i] - c.w[i])).toBeLessThanOrEqual(2e-6 * Math.max(1, Math.abs(c.w[i])));
}

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  const amax = b.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  return a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0) / (amax || 1);
}

const SHAPES: readonly (Shape & { name: string; skew?: boolean })[] = [
  { name: 'E=8 k=2, tails', T: 37, E: 8, k: 2, K: 70, I: 44 },
  { name: 'T=1', T: 1, E: 6, k: 3, K: 33, I: 20 },
  { name: 'k = E', T: 9, E: 3, k: 3, K: 24, I: 16 },
  { name: 'E=1', T: 11, E: 1, k: 1, K: 40, I: 24 },
  { name: 'all tokens to one expert first', T: 30, E: 16, k: 2, K: 64, I: 40, skew: true },
];

describe('moe.layer on the gpu engine', () => {
  for (const s of SHAPES) {
    it(`every stage on the device; the cpu's routing; float64 given it; gather/permute x scatter/weight-and-reduce agree (${s.name})`, async () => {
      const d = data(s, 17, s.skew);
      const base = await runLayer(gpu, s, d);
      expect(base.impl.every((i) => i.startsWith('webgpu'))).toBe(true);
      sameRouting(base, await runLayer(cpu, s, d));
      checkRef(s, d, base);
      for (const v of [{ gemm1: 'permute' }, { combine: 'weight_and_reduce' }, { gemm1: 'permute', combine: 'weight_and_reduce' }] as const) {
        const r = await runLayer(gpu, s, d, v);
        expect(Array.from(r.ids)).toEqual(Array.from(base.ids));
        checkRef(s, d, r);
      }
    });
  }

  it('bias, a shared expert, routingWeight input, forward_training', async () => {
    const s = SHAPES[0], d = data(s, 23);
    for (const c of [{ bias: true, sharedExpert: { intermediate: 24 } }, { routingWeight: 'input', gemm1: 'permute', bias: true }, { propKind: 'forward_training' }] as const) {
      const r = await runLayer(gpu, s, d, c);
      checkRef(s, d, r, c);
    }
  });

  it('a token choosing one expert in several slots: one routed row per slot', async () => {
    const s = { T: 21, E: 5, k: 3, K: 40, I: 20 };
    const d = data(s, 41);
    const rng = mulberry32(s.T);
    const ids = Int32Array.from({ length: s.T * s.k }, () => Math.floor(rng() * s.E));
    for (let t = 0; t < s.T; t += 3) ids.fill(t % s.E, t * s.k, (t + 1) * s.k);
    for (const c of [{}, { gemm1: 'permute', combine: 'weight_and_reduce' }] as const) {
      const r = await runLayer(gpu, s, d, c, dt.f32, {}, ids);
      expect(Array.from(r.ids)).toEqual(Array.from(ids));
      checkRef(s, d, r, c);
    }
  });

  it('expert parallel map (2 of 5 experts on this rank) matches the cpu layer', async () => {
    const s = { T: 13, E: 5, k: 2, K: 24, I: 12 }, d = data(s, 5);
    const map = Int32Array.from([-1, 0, -1, 1, -1]);
    const g = await runLayer(gpu, s, d, { localExperts: 2 }, dt.f32, { map });
    const c = await runLayer(cpu, s, d, { localExperts: 2 }, dt.f32, { map });
    sameRouting(g, c);
    expect(maxRelDiff(g.out, c.out)).toBeLessThan(1e-5);
  });

  it('weight-only int4 (s4, K-blocks of 8) and W8A8 match the cpu layer', async () => {
    const s = { T: 19, E: 4, k: 2, K: 32, I: 16 }, d = data(s, 9);
    const codes = (n: number, q: number, seed: number): Float64Array => {
      const rng = mulberry32(seed);
      return Float64Array.from({ length: n }, () => Math.floor(rng() * (2 * q + 1)) - q);
    };
    const q = { ...d, w13: codes(d.w13.length, 7, 1), w2: codes(d.w2.length, 7, 2) };
    const sc = (n: number, seed: number): Float64Array => randomF32(mulberry32(seed), n).map((v) => 0.01 + Math.abs(v) * 0.02);
    const int4: [Config, DataType, Extra] = [
      { weightScales: { w13: { mask: 7, groups: [1, 8, 1] }, w2: { mask: 7, groups: [1, 8, 1] } } }, dt.s4,
      { scales13: { dims: [s.E, s.K / 8, 2 * s.I], v: sc(s.E * (s.K / 8) * 2 * s.I, 3) }, scales2: { dims: [s.E, s.I / 8, s.K], v: sc(s.E * (s.I / 8) * s.K, 4) } },
    ];
    const w8a8: [Config, DataType, Extra] = [
      { quant: 'w8a8_dynamic', weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } }, dt.s8,
      { scales13: { dims: [s.E, 2 * s.I], v: sc(s.E * 2 * s.I, 5) }, scales2: { dims: [s.E, s.K], v: sc(s.E * s.K, 6) } },
    ];
    for (const [c, wdt, x] of [int4, w8a8]) {
      const g = await runLayer(gpu, s, q, c, wdt, x);
      const cc = await runLayer(cpu, s, q, c, wdt, x);
      sameRouting(g, cc);
      // int4: exact codes x f32 scales, only the summation order differs; W8A8: a row scale may round differently.
      expect(maxRelDiff(g.out, cc.out), String(wdt)).toBeLessThan(wdt === dt.s4 ? 1e-5 : 2e-2);
    }
  });

  it('T = 0 is a no-op; the layer reaches the queue in one submit', async () => {
    await runLayer(gpu, { T: 0, E: 3, k: 2, K: 8, I: 4 }, data({ T: 0, E: 3, k: 2, K: 8, I: 4 }, 1));
    const s = SHAPES[1], d = data(s, 3);
    const pd = new moe.layer.PrimitiveDesc(gpu, { tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, weights: { w13: memory.desc([s.E, s.K, 2 * s.I], dt.f32, tag.abc), w2: memory.desc([s.E, s.I, s.K], dt.f32, tag.abc) } });
    const layer = new moe.layer.Primitive(pd);
    const m = (dims: number[], v: ArrayLike<number>): GpuMemory => Memory.create(memory.desc(dims, dt.f32, dims.length === 2 ? tag.ab : tag.abc), gpu).write(Float64Array.from(v));
    const args = { [ARG.SRC]: m([s.T, s.K], d.hidden), [ARG.MOE_ROUTER_LOGITS]: m([s.T, s.E], d.logits), [ARG.WEIGHTS]: m([s.E, s.K, 2 * s.I], d.w13), [ARG.WEIGHTS_1]: m([s.E, s.I, s.K], d.w2), [ARG.DST]: Memory.create(pd.queryMd('dst')!, gpu) };
    const strm = new Stream(gpu);
    await strm.wait();
    const queue = gpu.device.queue as { submit: (cbs: GPUCommandBuffer[]) => void };
    const submit = queue.submit;
    let submits = 0;
    queue.submit = function (this: GPUQueue, cbs: GPUCommandBuffer[]) { submits++; submit.call(this, cbs); };
    try {
      layer.execute(strm, args);
      strm.submit();
    } finally {
      queue.submit = submit;
    }
    expect(submits).toBe(1);
    await strm.wait();
    layer.destroy();
  });

  it('routingWeight input with bf16 / f16 activations: the in-place weighting of the permuted rows matches the cpu layer', async () => {
    // The gpu's 16-bit store cleared its lane before reading the value it scaled: every routed row came out 0.
    const T = 5, K = 12, I = 8, E = 3, k = 2;
    const rng = mulberry32(77);
    const hidden = randomF32(rng, T * K), logits = randomF32(rng, T * E), w13 = randomF32(rng, E * K * 2 * I), w2 = randomF32(rng, E * I * K);
    for (const dataType of [dt.bf16, dt.f16]) {
      const outs: Float32Array[] = [];
      for (const eng of [cpu, gpu] as AnyEngine[]) {
        const pd = new moe.layer.PrimitiveDesc(eng, {
          tokens: T, hidden: K, intermediate: I, experts: E, topK: k, dataType, routingWeight: 'input', gemm1: 'permute',
          weights: { w13: memory.desc([E, K, 2 * I], dt.f32, tag.abc), w2: memory.desc([E, I, K], dt.f32, tag.abc) },
        });
        const m = (md: ReturnType<typeof memory.desc>, v: Float64Array): AnyMemory => Memory.create(md, eng).write(v);
        const dst = Memory.create(pd.queryMd('dst')!, eng);
        const args: Record<number, AnyMemory> = {
          [ARG.SRC]: m(pd.queryMd('hidden')!, hidden), [ARG.MOE_ROUTER_LOGITS]: m(pd.queryMd('logits')!, logits),
          [ARG.WEIGHTS]: m(pd.queryMd('w13')!, w13), [ARG.WEIGHTS_1]: m(pd.queryMd('w2')!, w2), [ARG.DST]: dst,
        };
        const strm = new Stream(eng);
        const layer = new moe.layer.Primitive(pd);
        if (eng.kind === 'gpu') for (const st of layer.stages) expect(st.implInfo, st.name).toMatch(/^webgpu/);
        if (eng.kind === 'gpu') (layer as unknown as moe.layer.Primitive<GpuEngine>).execute(strm, args as Record<number, GpuMemory>);
        else (layer as unknown as moe.layer.Primitive).execute(strm, args as Record<number, Memory>);
        await strm.wait();
        outs.push(Float32Array.from(await dst.read()));
        layer.destroy();
      }
      expect(outs[0].some((v) => Math.abs(v) > 1e-3)).toBe(true);
      expect(maxRelDiff(outs[1], outs[0]), dataType).toBeLessThan(dataType === dt.bf16 ? 2e-2 : 2e-3);
    }
  });

  it('a NaN router logit is raised at stream.wait() as a DnnlError naming the layer', async () => {
    const s = SHAPES[1], d = data(s, 3);
    d.logits[2] = NaN;
    const err = await runLayer(gpu, s, d).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(DnnlError);
    expect(String((err as DnnlError).message)).toMatch(/moe\.layer/);
    expect(String((err as DnnlError).message)).toMatch(/NaN/);
  });

  it('examples/moe_layer_gpu.ts (Qwen3-30B-A3B shape / 8, int4): decode and a small prefill, every stage on the device', async () => {
    const r = await runQwen3Layer(gpu, [1, 5], 8, 1);
    expect(r.map((x) => x.tokens)).toEqual([1, 5]);
    for (const x of r) {
      expect(x.out.length).toBe(x.tokens * (2048 / 8));
      expect(x.out.every((v) => Number.isFinite(v))).toBe(true);
      expect(x.out.some((v) => v !== 0)).toBe(true);
      expect(x.stages.map(([n]) => n)).toEqual(['route', 'dispatch', 'gemm1', 'gemm2', 'combine']);
      expect(x.stages.every(([, impl]) => impl.startsWith('webgpu'))).toBe(true);
    }
  });
});

describe('moe.layer at decode sizes on the gpu engine: gemm1 and gemm2 run gemv-splitk', () => {
  const DECODE: readonly (Shape & { name: string })[] = [
    { name: 'T = 1, E = 8, k = 2', T: 1, E: 8, k: 2, K: 72, I: 40 },
    { name: 'T = 3, E = 6, k = 3, K and I not multiples of the tile', T: 3, E: 6, k: 3, K: 70, I: 37 },
    { name: 'T = 2, E = 1', T: 2, E: 1, k: 1, K: 24, I: 16 },
  ];
  const gemv = (r: Run, stage: string): string => r.impl[r.stages.indexOf(stage)];
  for (const s of DECODE) {
    it(`float64 given the routing, for the fused and the unfused variants (${s.name})`, async () => {
      const d = data(s, 29);
      for (const c of [{}, { bias: true }, { combine: 'weight_and_reduce' }, { gemm1: 'permute', bias: true }] as const) {
        const r = await runLayer(gpu, s, d, c);
        expect(gemv(r, 'gemm1'), JSON.stringify(c)).toMatch(/^webgpu:gemv-splitk-/);
        expect(gemv(r, 'gemm2'), JSON.stringify(c)).toMatch(/^webgpu:gemv-splitk-/);
        checkRef(s, d, r, c);
      }
    });
  }

  it('expert parallel (2 of 5 experts here), weight-only int4 and W8A8 (the integer GEMM) match the cpu layer', async () => {
    const s = { T: 2, E: 5, k: 2, K: 32, I: 16 }, d = data(s, 13);
    const map = Int32Array.from([-1, 0, -1, 1, -1]);
    const g = await runLayer(gpu, s, d, { localExperts: 2 }, dt.f32, { map });
    expect(gemv(g, 'gemm1')).toMatch(/^webgpu:gemv-splitk-/);
    expect(gemv(g, 'gemm2')).toMatch(/^webgpu:gemv-splitk-/);
    const c = await runLayer(cpu, s, d, { localExperts: 2 }, dt.f32, { map });
    sameRouting(g, c);
    expect(maxRelDiff(g.out, c.out)).toBeLessThan(1e-5);
    const codes = (n: number, seed: number): Float64Array => {
      const rng = mulberry32(seed);
      return Float64Array.from({ length: n }, () => Math.floor(rng() * 15) - 7);
    };
    const q = { ...d, w13: codes(d.w13.length, 1), w2: codes(d.w2.length, 2) };
    const sc = (n: number, seed: number): Float64Array => randomF32(mulberry32(seed), n).map((v) => 0.01 + Math.abs(v) * 0.02);
    const extra: Extra = { scales13: { dims: [s.E, s.K / 32, 2 * s.I], v: sc(s.E * (s.K / 32) * 2 * s.I, 3) }, scales2: { dims: [s.E, s.I / 16, s.K], v: sc(s.E * (s.I / 16) * s.K, 4) } };
    const int4: Config = { weightScales: { w13: { mask: 7, groups: [1, 32, 1] }, w2: { mask: 7, groups: [1, 16, 1] } } };
    const gi = await runLayer(gpu, s, q, int4, dt.s4, extra);
    expect(gemv(gi, 'gemm1')).toMatch(/^webgpu:gemv-splitk-/);
    expect(gemv(gi, 'gemm2')).toMatch(/^webgpu:gemv-splitk-/);
    expect(maxRelDiff(gi.out, (await runLayer(cpu, s, q, int4, dt.s4, extra)).out)).toBeLessThan(1e-5);
    const w8a8Config: Config = { quant: 'w8a8_dynamic', weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } };
    const w8a8Extra: Extra = { scales13: { dims: [s.E, 2 * s.I], v: sc(s.E * 2 * s.I, 5) }, scales2: { dims: [s.E, s.K], v: sc(s.E * s.K, 6) } };
    const w8a8 = await runLayer(gpu, s, q, w8a8Config, dt.s8, w8a8Extra);
    expect(gemv(w8a8, 'gemm1')).toMatch(/^webgpu:gemv-splitk-/);
    expect(gemv(w8a8, 'gemm2')).toMatch(/^webgpu:gemv-splitk-/);
    // A row scale may round differently from the cpu's (the dynamic quantization), as at prefill sizes.
    expect(maxRelDiff(w8a8.out, (await runLayer(cpu, s, q, w8a8Config, dt.s8, w8a8Extra)).out)).toBeLessThan(2e-2);
  });
});
