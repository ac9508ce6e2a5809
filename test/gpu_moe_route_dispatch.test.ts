/**
 * moe.layer on the gpu engine at decode sizes records route + dispatch as one dispatch
 * (webgpu:moe-route+dispatch-one): the same bits in every output the two stages write and the layer's
 * output, the same errors at stream.wait(), and the layouts it refuses keep the two stages.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, GpuEngine, GpuMemory, Memory, Stream, dt, memory, moe, tag, type DataType } from '../src/index.js';
import { gpuLayerTuning } from '../src/primitives/moe/layer/route_dispatch_gpu.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { data, type Shape } from './moe_layer_reference.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });
// The kernel routes up to 32 tokens, 8 at once; the default caps (8 tokens, 2 in turn, by its GPU time) are lifted here so its rounds are tested.
beforeEach(() => { gpuLayerTuning.fuseMaxTokens = 32; gpuLayerTuning.fuseMaxRounds = 32; });
afterEach(() => { gpuLayerTuning.fuseRouteDispatch = true; gpuLayerTuning.fuseMaxTokens = 8; gpuLayerTuning.fuseMaxRounds = 2; });

type Config = Omit<moe.layer.LayerConfig, 'tokens' | 'hidden' | 'intermediate' | 'experts' | 'topK' | 'weights'>;
interface Inputs { readonly logits?: Float64Array; readonly map?: Int32Array; readonly bias?: Float64Array }
interface Out { out: Float32Array; ids: Int32Array; w: Float32Array; rows: Int32Array[]; fused: string[]; refusal: string | undefined }

function mem<M extends Memory | GpuMemory>(eng: Engine | GpuEngine, dims: number[], v: ArrayLike<number>, t: DataType = dt.f32): M {
  const m = Memory.create(memory.desc(dims, t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc), eng as GpuEngine);
  m.write(Float64Array.from(v));
  return m as M;
}

/** The layer's execute on `eng` (gpu: fused or not as `fuse` says); its output and the route / dispatch outputs. */
async function run(eng: Engine | GpuEngine, s: Shape, c: Config, x: Inputs = {}, fuse = true, seed = 5): Promise<Out> {
  gpuLayerTuning.fuseRouteDispatch = fuse;
  const d = data(s, seed);
  const G = c.localExperts ?? s.E;
  const weights = { w13: memory.desc([G, s.K, 2 * s.I], dt.f32, tag.abc), w2: memory.desc([G, s.I, s.K], dt.f32, tag.abc) };
  const pd = new moe.layer.PrimitiveDesc(eng, { tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, weights, ...c, routing: { renormalize: true, ...c.routing } });
  const layer = new moe.layer.Primitive(pd);
  const strm = new Stream(eng);
  const out = Memory.create(pd.queryMd('dst')!, eng as GpuEngine);
  const args: Record<number, Memory | GpuMemory> = {
    [ARG.SRC]: mem(eng, [s.T, s.K], d.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(eng, [s.T, s.E], x.logits ?? d.logits),
    [ARG.WEIGHTS]: mem(eng, [G, s.K, 2 * s.I], d.w13.subarray(0, G * s.K * 2 * s.I)), [ARG.WEIGHTS_1]: mem(eng, [G, s.I, s.K], d.w2.subarray(0, G * s.I * s.K)), [ARG.DST]: out,
  };
  if (x.map) args[ARG.MOE_EXPERT_MAP] = mem(eng, [s.E], x.map, dt.s32);
  if (x.bias) args[ARG.MOE_CORRECTION_BIAS] = mem(eng, [s.E], x.bias);
  try {
    // Twice: the second execution reuses params and bind groups (and must not see the first one's state).
    for (let i = 0; i < 2; i++) {
      (layer as unknown as moe.layer.Primitive<GpuEngine>).execute(strm, args as Record<number, GpuMemory>);
      await strm.wait();
    }
    const ws = layer.workspace;
    return {
      out: Float32Array.from(await out.read()), ids: Int32Array.from(await ws.topkIds.read()), w: Float32Array.from(await ws.topkWeights.read()),
      rows: await Promise.all([ws.rowOf, ws.tokenIndex, ws.tokenKs].map(async (m) => Int32Array.from(await m.read()))),
      fused: layer.fused.map((f) => `${f.stages.join('+')}:${f.implInfo}`), refusal: layer.fusedRefusal,
    };
  } finally {
    layer.destroy();
  }
}

const bits = (a: Float32Array): Uint32Array => new Uint32Array(a.buffer, a.byteOffset, a.length);

/** Fused and unfused runs give the same bits everywhere; the fused one did fuse. */
async function sameBits(s: Shape, c: Config, x: Inputs = {}): Promise<Out> {
  const f = await run(gpu, s, c, x, true);
  const u = await run(gpu, s, c, x, false);
  expect(f.fused).toEqual(['route+dispatch:webgpu:moe-route+dispatch-one']);
  expect(u.fused).toEqual([]);
  expect(u.refusal).toBe('switched off');
  expect(f.ids).toEqual(u.ids);
  expect(bits(f.w)).toEqual(bits(u.w));
  expect(f.rows).toEqual(u.rows);
  expect(bits(f.out)).toEqual(bits(u.out));
  expect(f.out.some((v) => Math.abs(v) > 1e-3)).toBe(true);
  return f;
}

const small = (T: number, E: number, k: number): Shape => ({ T, E, k, K: 20, I: 12 });

describe('moe.layer on the gpu engine: route + dispatch as one dispatch at decode sizes', () => {
  it('the same bits as the two stages: T = 1, 4, 8 and 13 (8 at once, then 5 of 8 groups), softmax, the cpu layer\'s experts', async () => {
    for (const s of [small(1, 8, 2), small(4, 16, 6), small(8, 64, 6), small(13, 16, 4)]) {
      const f = await sameBits(s, {});
      const c = await run(cpu, s, {});
      expect(f.ids).toEqual(c.ids);
    }
  });

  it('ties (equal logits) go to the lower expert as on the cpu; E = 1 (k = 1); k = E', async () => {
    const s = small(3, 8, 3);
    // Token 0: all equal; token 1: two pairs tied at the top; token 2: a tie across the k-th place.
    const logits = Float64Array.from([0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 1, 0, 0, 0, 0, 3, 1, 1, 1, 1, 1, 0, 0]);
    const f = await sameBits(s, {}, { logits });
    expect(Array.from(f.ids)).toEqual([0, 1, 2, 1, 2, 0, 0, 1, 2]);
    expect((await run(cpu, s, {}, { logits })).ids).toEqual(f.ids);
    // The same ties 8 at once (groups of 32 lanes), tokens 3-7 repeating tokens 0-2 and then all equal.
    const s8 = small(8, 8, 3), logits8 = Float64Array.from({ length: 64 }, (_, i) => (i < 24 ? logits[i] : i < 48 ? logits[i - 24] : 0));
    const f8 = await sameBits(s8, {}, { logits: logits8 });
    expect(Array.from(f8.ids)).toEqual([...f.ids, ...f.ids, 0, 1, 2, 0, 1, 2]);
    await sameBits(small(2, 1, 1), {});
    await sameBits(small(2, 4, 4), {});
  });

  it('sigmoid with a correction bias and grouped top-k; an expert map (2 of 5 experts here)', async () => {
    const E = 8, bias = Float64Array.from({ length: E }, (_, e) => (e % 3) * 0.05);
    for (const T of [3, 8]) await sameBits(small(T, E, 2), { routing: { scoring: 'sigmoid', correctionBias: true, groupCount: 4, kGroup: 2 } }, { bias });
    const map = Int32Array.from([-1, 0, -1, 1, -1]);
    for (const T of [4, 8]) {
      const f = await sameBits(small(T, 5, 2), { localExperts: 2 }, { map });
      expect(f.rows[0].some((r) => r < 0)).toBe(true);
    }
  });

  it('errors at stream.wait() read as the two stages\': a NaN logit (routing), a bad expert map entry (dispatch)', async () => {
    const s = small(2, 8, 2), d = data(s, 5);
    const message = async (x: Inputs, c: Config, fuse: boolean): Promise<string> => {
      const e = await run(gpu, s, c, x, fuse).then(() => undefined, (err: unknown) => err);
      expect(e).toBeInstanceOf(DnnlError);
      return (e as DnnlError).message;
    };
    const logits = Float64Array.from(d.logits);
    logits[11] = NaN;
    const nan = await message({ logits }, {}, true);
    expect(nan).toMatch(/moe\.layer\.execute: .*NaN.*\(stage route\)/);
    expect(nan).toBe(await message({ logits }, {}, false));
    const map = Int32Array.from([0, 1, -1, 9, 0, 1, -1, -1]);
    const bad = await message({ map }, { localExperts: 2 }, true);
    expect(bad).toMatch(/\(stage dispatch\)/);
    expect(bad).toBe(await message({ map }, { localExperts: 2 }, false));
  });

  it('refused, with the two stages kept: gemm1 permute (hidden copy), past the token caps, T k > 256, W8A8 (quantize_hidden between), a cpu engine', async () => {
    const permute = await run(gpu, small(2, 8, 2), { gemm1: 'permute' });
    expect(permute.fused).toEqual([]);
    expect(permute.refusal).toMatch(/dispatch takes its 'grid' form/);
    gpuLayerTuning.fuseMaxTokens = 8;
    gpuLayerTuning.fuseMaxRounds = 2;
    const nine = await run(gpu, small(9, 8, 2), {});
    expect(nine.fused).toEqual([]);
    expect(nine.refusal).toMatch(/T = 9 tokens: past 8, one workgroup routes them slower/);
    expect((await run(gpu, small(8, 8, 2), {})).fused).toEqual(['route+dispatch:webgpu:moe-route+dispatch-one']);
    gpuLayerTuning.fuseMaxTokens = 32;
    gpuLayerTuning.fuseMaxRounds = 1;
    const rounds = await run(gpu, small(9, 8, 2), {});
    expect(rounds.fused).toEqual([]);
    expect(rounds.refusal).toMatch(/T = 9 tokens, 8 at once: 2 in turn, past 1 slower/);
    gpuLayerTuning.fuseMaxRounds = 32;
    const big = await run(gpu, { T: 33, E: 8, k: 8, K: 8, I: 4 }, {});
    expect(big.fused).toEqual([]);
    expect(big.refusal).toMatch(/T = 33 tokens/);
    const s = small(1, 8, 2);
    const weights = { w13: memory.desc([8, s.K, 2 * s.I], dt.s8, tag.abc), w2: memory.desc([8, s.I, s.K], dt.s8, tag.abc) };
    const w8a8 = new moe.layer.Primitive(new moe.layer.PrimitiveDesc(gpu, {
      tokens: 1, hidden: s.K, intermediate: s.I, experts: 8, topK: 2, weights, quant: 'w8a8_dynamic', weightScales: { w13: { mask: 5 }, w2: { mask: 5 } },
    }));
    expect(w8a8.fused).toEqual([]);
    expect(w8a8.fusedRefusal).toMatch(/quantize_hidden/);
    w8a8.destroy();
    expect((await run(cpu, small(1, 8, 2), {})).refusal).toBe('a cpu engine');
  });
});
