/**
 * Seeded randomized cross-check of moe.layer (and of its routing and dispatch stages) on the cpu and
 * the gpu engine against the float64 references of the tests (test/moe_layer_reference.ts,
 * test/moe_routing_reference.ts, test/moe_dispatch_cases.ts):
 *
 *   npx tsx bench/moe_fuzz.ts --seed=S --count=N [--stages=layer,routing,dispatch] [--only=i]
 *
 * (the gpu engine is Dawn: without a GPU, VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json).
 * Per layer configuration: the cpu layer and the gpu layer each against the float64 layer reference
 * given their own routing, the cpu routing against the float64 routing reference (tokens without a
 * near-tie, whose f32 order may differ from float64's), the gpu's selected experts equal to the cpu's,
 * the gpu run twice with the same bits, and bad routing input (a NaN logit) a DnnlError at wait with
 * the weights untouched. Each failure prints the config as JSON: `--seed=S --only=i` reruns it.
 */
import {
  ARG, DnnlError, Engine, GpuEngine, GpuMemory, Memory, MemoryDesc, Stream, dt, memory, moe, reorder, tag, type DataType, type GluAlg, type GluLayout,
} from '../src/index.js';
import type { RoutingOptions } from '../src/primitives/moe/routing/index.js';
import type { DispatchOptions } from '../src/primitives/moe/dispatch/index.js';
import { refMoeLayer } from '../test/moe_layer_reference.js';
import { routeF64 } from '../test/moe_routing_reference.js';
import { randomIds, refPlace } from '../test/moe_dispatch_cases.js';
import { mulberry32, randomF32, type Rng } from '../test/workloads.js';
import { useSwiftShaderWithoutDriver } from '../test/swiftshader_env.js';

type AnyEngine = Engine | GpuEngine;
type AnyMemory = Memory | GpuMemory;

/** Weight formats of the routed experts: codes x scales (`blk` rows of K per scale, 0 = per column). */
export type WeightFormat = 'f32' | 's8' | 'u8' | 's4' | 'u4' | 'mxfp4' | 'nvfp4' | 'w8a8';
const WFMT: Record<WeightFormat, { wdt: DataType; sdt?: DataType; blocks: readonly number[] }> = {
  f32: { wdt: dt.f32, blocks: [] }, s8: { wdt: dt.s8, blocks: [0, 8, 32] }, u8: { wdt: dt.u8, blocks: [0, 16] },
  s4: { wdt: dt.s4, blocks: [0, 8, 16, 32] }, u4: { wdt: dt.u4, blocks: [0, 32] }, mxfp4: { wdt: dt.f4_e2m1, sdt: dt.e8m0, blocks: [32] },
  nvfp4: { wdt: dt.f4_e2m1, sdt: dt.f8_e4m3, blocks: [16] }, w8a8: { wdt: dt.s8, blocks: [0] },
};

/** One layer configuration: everything the run needs, data included by seed. */
export interface LayerCase {
  readonly T: number; readonly E: number; readonly k: number; readonly K: number; readonly I: number;
  readonly G: number;
  readonly routing: NonNullable<moe.layer.LayerConfig['routing']>;
  readonly glu: { alg: GluAlg; layout: GluLayout };
  readonly gemm1: 'gather' | 'permute';
  readonly combine: 'fused_scatter' | 'weight_and_reduce';
  readonly routingWeight: 'output' | 'input';
  readonly bias: boolean;
  readonly dataType: 'f32' | 'bf16' | 'f16';
  readonly wfmt: WeightFormat;
  readonly blk: number;
  readonly packed: boolean;
  readonly dq: boolean;
  readonly training: boolean;
  readonly shared: { Is: number; gate: boolean; glu?: { alg: GluAlg; layout: GluLayout } } | undefined;
  readonly accumulation: 'strict' | 'relaxed';
  readonly ties: boolean;
  /** Replace the routing's ids (after the route stage) with ids repeating an expert in a token's slots. */
  readonly repeatIds: boolean;
  readonly dataSeed: number;
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];
const int = (rng: Rng, lo: number, hi: number): number => lo + Math.floor(rng() * (hi - lo + 1));
const roundUp = (v: number, m: number): number => Math.ceil(v / m) * m;

/** A random layer configuration the pd should accept (its documented rules respected). */
export function genLayerCase(rng: Rng): LayerCase {
  const E = int(rng, 1, 12), k = int(rng, 1, E), T = rng() < 0.08 ? 0 : rng() < 0.3 ? int(rng, 1, 3) : int(rng, 1, 40);
  let K = int(rng, 1, 160), I = int(rng, 1, 96);
  const training = rng() < 0.08;
  const wfmt: WeightFormat = training ? 'f32' : pick(rng, ['f32', 'f32', 'f32', 's8', 'u8', 's4', 'u4', 'mxfp4', 'nvfp4', 'w8a8'] as const);
  const blk = pick(rng, WFMT[wfmt].blocks) ?? 0;
  if (blk) {
    K = roundUp(K, blk);
    I = roundUp(I, blk);
  }
  const G = training || rng() < 0.7 ? E : int(rng, 1, E);
  const divisors = [...Array(E).keys()].map((i) => i + 1).filter((d) => E % d === 0);
  const groupCount = rng() < 0.3 ? pick(rng, divisors) : 1;
  const per = E / groupCount;
  const kGroup = int(rng, Math.ceil(k / per), groupCount);
  const mode: 0 | 1 = per >= 2 && rng() < 0.5 ? 1 : 0;
  const routing: LayerCase['routing'] = {
    scoring: rng() < 0.5 ? 'softmax' : 'sigmoid', renormalize: rng() < 0.6,
    ...(rng() < 0.2 ? { renormalizeEps: pick(rng, [1e-20, 1e-6, 0.5]) } : {}),
    ...(rng() < 0.3 ? { routedScalingFactor: pick(rng, [2.5, 0.75, -1]) } : {}),
    ...(groupCount > 1 ? { groupCount, kGroup, groupSelectMode: mode } : {}),
    ...(rng() < 0.25 ? { correctionBias: true } : {}),
  };
  const alg = pick(rng, ['glu_swiglu', 'glu_geglu_tanh', 'glu_swiglu_oai'] as const);
  const layout = I % 32 === 0 && rng() < 0.3 ? 'blocks32' : pick(rng, ['halves', 'interleaved'] as const);
  const w8a8 = wfmt === 'w8a8';
  const routingWeight = !training && !w8a8 && rng() < 0.2 ? 'input' : 'output';
  // w8a8 gathers the per-token activation scales with the rows: gemm1 'gather' (a documented rule).
  const gemm1 = training || routingWeight === 'input' || (!w8a8 && rng() < 0.4) ? 'permute' : 'gather';
  const combine = training || rng() < 0.4 ? 'weight_and_reduce' : 'fused_scatter';
  const dataType = training || rng() < 0.8 ? 'f32' : pick(rng, ['bf16', 'f16'] as const);
  const dq = !training && wfmt !== 'f32' && !w8a8 && rng() < 0.3;
  // The shared expert takes the routed GLU: blocks32 needs Is % 32 == 0 there too.
  const sharedGlu = rng() < 0.4 ? { alg: pick(rng, ['glu_swiglu', 'glu_geglu_tanh', 'glu_swiglu_oai'] as const), layout: pick(rng, ['halves', 'interleaved'] as const) } : undefined;
  const shared = !training && rng() < 0.2 ? { Is: layout === 'blocks32' && !sharedGlu ? 32 : int(rng, 1, 40), gate: rng() < 0.5, ...(sharedGlu ? { glu: sharedGlu } : {}) } : undefined;
  const accumulation = !training && rng() < 0.25 ? 'relaxed' : 'strict';
  return {
    T, E, k, K, I, G, routing, glu: { alg, layout }, gemm1, combine, routingWeight, bias: rng() < 0.4, dataType, wfmt, blk,
    // The cpu's dynamic int8 with K-block scales packs the weights (tag.any) itself: plain ones are refused there.
    packed: !training && (rng() < 0.5 || (dq && blk > 0)), dq, training, shared, accumulation, ties: rng() < 0.4, repeatIds: rng() < 0.15, dataSeed: Math.floor(rng() * 2 ** 31),
  };
}

/** The layer config of a case. */
export function layerConfig(c: LayerCase): moe.layer.LayerConfig {
  const f = WFMT[c.wfmt];
  const t = c.packed ? tag.any : tag.abc;
  const scales = c.wfmt === 'f32' ? undefined : c.blk ? { mask: 7, groups: [1, c.blk, 1], ...(f.sdt ? { dataType: f.sdt } : {}) } : { mask: 5 };
  return {
    tokens: c.T, hidden: c.K, intermediate: c.I, experts: c.E, topK: c.k, routing: c.routing, glu: c.glu, dataType: c.dataType,
    ...(c.G !== c.E ? { localExperts: c.G } : {}),
    weights: { w13: memory.desc([c.G, c.K, 2 * c.I], f.wdt, t), w2: memory.desc([c.G, c.I, c.K], f.wdt, t) },
    ...(scales ? { weightScales: { w13: scales, w2: scales } } : {}),
    ...(c.wfmt === 'w8a8' ? { quant: 'w8a8_dynamic' as const } : {}),
    ...(c.dq ? { dynamicQuantization: 's8' as const } : {}),
    ...(c.training ? { propKind: 'forward_training' as const } : {}),
    ...(c.shared ? { sharedExpert: { intermediate: c.shared.Is, gate: c.shared.gate, ...(c.shared.glu ? { glu: c.shared.glu } : {}) } } : {}),
    ...(c.accumulation === 'relaxed' ? { accumulationMode: 'relaxed' as const } : {}),
    gemm1: c.gemm1, combine: c.combine, routingWeight: c.routingWeight, bias: c.bias,
  };
}

/** The inputs of a case: codes exact in their type, scales exact in theirs, logits random or tie-heavy. */
interface LayerData {
  hidden: Float64Array; logits: Float64Array; c13: Float64Array; c2: Float64Array; s13?: Float64Array; s2?: Float64Array;
  b13: Float64Array; b2: Float64Array; map?: Int32Array; cbias?: Float64Array; sw13?: Float64Array; sw2?: Float64Array; sgate?: Float64Array;
}

function codes(rng: Rng, n: number, f: WeightFormat): Float64Array {
  const fp4 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
  const gen: Record<WeightFormat, () => number> = {
    f32: () => Math.fround((rng() * 2 - 1) * 0.2), s8: () => int(rng, -127, 127), w8a8: () => int(rng, -127, 127), u8: () => int(rng, 0, 255),
    s4: () => int(rng, -8, 7), u4: () => int(rng, 0, 15), mxfp4: () => pick(rng, fp4) * (rng() < 0.5 ? -1 : 1), nvfp4: () => pick(rng, fp4) * (rng() < 0.5 ? -1 : 1),
  };
  return Float64Array.from({ length: n }, gen[f]);
}

function scaleValues(rng: Rng, n: number, c: LayerCase): Float64Array {
  const big = c.wfmt === 's8' || c.wfmt === 'u8' || c.wfmt === 'w8a8' ? 0.002 : 0.03;
  const sdt = WFMT[c.wfmt].sdt;
  return Float64Array.from({ length: n }, () => {
    if (sdt === dt.e8m0) return 2 ** -int(rng, 3, 6);
    if (sdt === dt.f8_e4m3) return (1 + int(rng, 0, 7) / 8) * 2 ** -int(rng, 3, 6);
    return Math.fround(big * (0.5 + rng()));
  });
}

export function layerData(c: LayerCase): LayerData {
  const rng = mulberry32(c.dataSeed);
  const { T, E, K, I, G } = c;
  const lowp = c.dataType !== 'f32';
  // 16-bit activations: values exact in bf16 and f16 (k / 16, |k| <= 32).
  const vals = (n: number): Float64Array => (lowp ? Float64Array.from({ length: n }, () => int(rng, -32, 32) / 16) : randomF32(rng, n));
  const tieSet = [-2, -0.5, 0, 0.75, 1.5];
  const logits = c.ties ? Float64Array.from({ length: T * E }, () => pick(rng, tieSet)) : vals(T * E).map((v) => v * 4);
  const out: LayerData = {
    hidden: vals(T * K), logits, c13: codes(rng, G * K * 2 * I, c.wfmt), c2: codes(rng, G * I * K, c.wfmt),
    b13: randomF32(rng, G * 2 * I).map((v) => Math.fround(v * 0.1)), b2: randomF32(rng, G * K).map((v) => Math.fround(v * 0.1)),
  };
  if (c.wfmt !== 'f32') {
    const rows13 = c.blk ? K / c.blk : 1, rows2 = c.blk ? I / c.blk : 1;
    out.s13 = scaleValues(rng, G * rows13 * 2 * I, c);
    out.s2 = scaleValues(rng, G * rows2 * K, c);
  }
  if (G !== E) {
    const perm = [...Array(E).keys()].sort(() => rng() - 0.5).slice(0, G);
    out.map = new Int32Array(E).fill(-1);
    perm.forEach((e, l) => { out.map![e] = l; });
  }
  if (c.routing.correctionBias) out.cbias = c.ties ? Float64Array.from({ length: E }, () => pick(rng, [0, 0, 0.25])) : randomF32(rng, E).map((v) => Math.fround(v * 0.2));
  if (c.shared) {
    const Is = c.shared.Is;
    out.sw13 = randomF32(rng, K * 2 * Is).map((v) => Math.fround(v * 0.2));
    out.sw2 = randomF32(rng, Is * K).map((v) => Math.fround(v * 0.2));
    if (c.shared.gate) out.sgate = randomF32(rng, K);
  }
  return out;
}

/** Dequantized weights [G, R, C] from codes and scales (per column or per K block of blk rows). */
function dequant(codesV: Float64Array, s: Float64Array | undefined, G: number, R: number, C: number, blk: number): Float64Array {
  if (!s) return codesV;
  return codesV.map((v, i) => {
    const g = Math.floor(i / (R * C)), r = Math.floor(i / C) % R, col = i % C;
    return v * (blk ? s[(g * (R / blk) + Math.floor(r / blk)) * C + col] : s[g * C + col]);
  });
}

interface LayerRun { out: Float32Array; ids: Int32Array; w: Float32Array; impl: string[] }

function plainMem(eng: AnyEngine, dims: readonly number[], v: ArrayLike<number>, t: DataType = dt.f32): AnyMemory {
  const tg = dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc;
  const m = Memory.create(memory.desc([...dims], t, tg), eng);
  if (m.elementCount) m.write(Float64Array.from(v));
  return m;
}

/** Weights in the layer's descriptor: written directly, or reordered from plain codes (+ the scales, for `+q` packed weights). */
function weightMem(eng: AnyEngine, strm: Stream, md: MemoryDesc, plainDims: number[], v: Float64Array, scales: AnyMemory | undefined): { mem: AnyMemory; scalesToLayer: boolean } {
  const plain = plainMem(eng, plainDims, v, md.dataType);
  if (md.format !== 'packed') return { mem: plain, scalesToLayer: true };
  const mem = Memory.create(md, eng);
  const q = md.packed?.quant !== undefined;
  const rpd = new reorder.PrimitiveDesc(eng, plain.desc, md);
  const args: Record<number, AnyMemory> = { [ARG.FROM]: plain, [ARG.TO]: mem };
  if (q && scales) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales;
  (new reorder.Primitive(rpd) as unknown as { execute(s: Stream, a: Record<number, AnyMemory>): void }).execute(strm, args);
  return { mem, scalesToLayer: !q };
}

async function readAll(m: AnyMemory): Promise<Float64Array> {
  return Float64Array.from(m instanceof GpuMemory ? await m.read() : m.read());
}

/** Runs the layer once on `eng`; `sentinel` fills dst first. */
async function runLayerCase(eng: AnyEngine, c: LayerCase, d: LayerData, logits = d.logits, ids?: Int32Array, map = d.map): Promise<LayerRun & { w13Before: Float64Array; w13After: Float64Array }> {
  const strm = new Stream(eng);
  const cfg = layerConfig(c);
  const pd = new moe.layer.PrimitiveDesc(eng, cfg);
  const layer = new moe.layer.Primitive(pd);
  const { T, E, K, I, G } = c;
  const f = WFMT[c.wfmt];
  const sdims = (R: number, C: number): number[] => (c.blk ? [G, R / c.blk, C] : [G, C]);
  const s13 = d.s13 && plainMem(eng, sdims(K, 2 * I), d.s13, f.sdt ?? dt.f32), s2 = d.s2 && plainMem(eng, sdims(I, K), d.s2, f.sdt ?? dt.f32);
  const w13 = weightMem(eng, strm, pd.queryMd('w13')!, [G, K, 2 * I], d.c13, s13), w2 = weightMem(eng, strm, pd.queryMd('w2')!, [G, I, K], d.c2, s2);
  const dst = Memory.create(pd.queryMd('dst')!, eng);
  if (dst.elementCount) dst.write(new Float64Array(dst.elementCount).fill(-7));
  const args: Record<number, AnyMemory | undefined> = {
    [ARG.SRC]: plainMem(eng, [T, K], d.hidden, c.dataType), [ARG.MOE_ROUTER_LOGITS]: plainMem(eng, [T, E], logits, c.dataType),
    [ARG.WEIGHTS]: w13.mem, [ARG.WEIGHTS_1]: w2.mem, [ARG.DST]: dst,
  };
  if (w13.scalesToLayer && s13) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = s13;
  if (w2.scalesToLayer && s2) args[ARG.ATTR_SCALES | ARG.WEIGHTS_1] = s2;
  if (c.bias) {
    args[ARG.BIAS] = plainMem(eng, [G, 2 * I], d.b13);
    args[ARG.MOE_W2_BIAS] = plainMem(eng, [G, K], d.b2);
  }
  if (map) args[ARG.MOE_EXPERT_MAP] = plainMem(eng, [E], map, dt.s32);
  if (d.cbias) args[ARG.MOE_CORRECTION_BIAS] = plainMem(eng, [E], d.cbias);
  if (c.shared) {
    args[ARG.MOE_SHARED_W13] = plainMem(eng, [K, 2 * c.shared.Is], d.sw13!);
    args[ARG.MOE_SHARED_W2] = plainMem(eng, [c.shared.Is, K], d.sw2!);
    if (d.sgate) args[ARG.MOE_SHARED_EXPERT_GATE] = plainMem(eng, [K, 1], d.sgate);
  }
  await strm.wait();
  // What the run must leave alone (a packed weight cannot be read back as elements: check the hidden input then).
  const guard = pd.queryMd('w13')!.format === 'packed' ? args[ARG.SRC]! : w13.mem;
  const w13Before = await readAll(guard);
  try {
    type Exec = { execute(s: Stream, a: Record<number, AnyMemory | undefined>): void };
    if (ids) {
      const stages = layer.stages as unknown as readonly (Exec & { name: string })[];
      stages[0].execute(strm, args);
      await strm.wait();
      (layer.workspace.topkIds as unknown as { write(v: ArrayLike<number>): void }).write(ids);
      for (const st of stages.slice(1)) st.execute(strm, args);
    } else (layer as unknown as Exec).execute(strm, args);
    await strm.wait();
    return {
      out: Float32Array.from(await readAll(dst)), ids: Int32Array.from(await readAll(layer.workspace.topkIds)), w: Float32Array.from(await readAll(layer.workspace.topkWeights)),
      impl: layer.stages.map((st) => `${st.name}=${st.implInfo}`), w13Before, w13After: await readAll(guard),
    };
  } catch (e) {
    (e as { w13After?: Float64Array; w13Before?: Float64Array }).w13After = await readAll(guard);
    (e as { w13Before?: Float64Array }).w13Before = w13Before;
    throw e;
  } finally {
    layer.destroy();
  }
}

/** The float64 selection scores of one token (scores + correction bias), as the routing reference defines them. */
function selectionF64(scoring: 'softmax' | 'sigmoid', x: ArrayLike<number>, bias: ArrayLike<number> | undefined): number[] {
  const v = Array.from(x);
  let score: number[];
  if (scoring === 'sigmoid') score = v.map((z) => 1 / (1 + Math.exp(-z)));
  else {
    const m = Math.max(...v), ex = v.map((z) => Math.exp(z - m)), sum = ex.reduce((a, b) => a + b, 0);
    score = ex.map((z) => z / sum);
  }
  return score.map((z, e) => z + (bias ? bias[e] : 0));
}

/**
 * Two different float64 values that f32 may order either way or make equal: within 1e-5 relative, or
 * both below the f32 normal range (a gpu may flush subnormals). Exact float64 ties are not excused:
 * equal logits give equal f32 scores, and the tie rule (lower index) must hold.
 */
function f32Ambiguous(a: number, b: number): boolean {
  if (a === b) return false;
  const tiny = 2 ** -126;
  if (Math.abs(a) < tiny && Math.abs(b) < tiny) return true;
  return Math.fround(a) === Math.fround(b) || Math.abs(a - b) <= 1e-5 * Math.max(Math.abs(a), Math.abs(b));
}

/** The float64 routing of a case, and the tokens whose f32 order may differ from float64's (a near-tie among its values or group scores). */
function routeRef(c: LayerCase, d: LayerData): { ids: Int32Array; weights: Float64Array; nearTie: boolean[] } {
  const r = c.routing;
  const spec = {
    topK: c.k, scoring: r.scoring ?? 'softmax', renormalize: r.renormalize ?? false, eps: r.renormalizeEps === undefined ? undefined : Math.fround(r.renormalizeEps),
    scale: r.routedScalingFactor ?? 1, groupCount: r.groupCount ?? 1, kGroup: r.kGroup ?? 1, mode: r.groupSelectMode ?? 0, bias: d.cbias,
  } as const;
  const ref = routeF64(d.logits, c.T, c.E, spec);
  const per = c.E / spec.groupCount;
  const nearTie = Array.from({ length: c.T }, (_, t) => {
    const sel = selectionF64(spec.scoring, d.logits.subarray(t * c.E, (t + 1) * c.E), d.cbias);
    const groups = [...Array(spec.groupCount).keys()].map((g) => {
      const v = sel.slice(g * per, (g + 1) * per).sort((a, b) => b - a);
      return spec.mode === 0 ? v[0] : v[0] + v[1];
    });
    const amb = (v: number[]): boolean => v.some((a, i) => v.some((b, j) => j > i && f32Ambiguous(a, b)));
    // An inf - inf in the reference (sigmoid +inf with a bias, say) is not a decision this check can judge.
    return amb(sel) || (spec.groupCount > 1 && amb(groups)) || sel.some(Number.isNaN);
  });
  return { ids: ref.ids, weights: ref.weights, nearTie };
}

/** Worst |out - ref| / magnitude of a run against the float64 layer reference given its own routing. */
function layerError(c: LayerCase, d: LayerData, r: LayerRun): number {
  const { G, K, I } = c;
  const localIds = Int32Array.from(r.ids, (e) => (d.map ? d.map[e] : e));
  const ref = refMoeLayer({
    T: c.T, K, I, k: c.k, hidden: d.hidden, ids: localIds, weights: r.w,
    w13: dequant(d.c13, d.s13, G, K, 2 * I, c.blk), w2: dequant(d.c2, d.s2, G, I, K, c.blk),
    b13: c.bias ? d.b13 : undefined, b2: c.bias ? d.b2 : undefined, glu: c.glu,
    shared: c.shared ? { Is: c.shared.Is, w13: d.sw13!, w2: d.sw2!, gate: d.sgate, glu: c.shared.glu } : undefined, routingWeight: c.routingWeight,
  });
  let worst = 0;
  for (let i = 0; i < ref.value.length; i++) {
    const e = Math.abs(r.out[i] - ref.value[i]) / (ref.mag[i] + 1e-30);
    worst = Math.max(worst, Number.isNaN(e) ? Infinity : e);
  }
  return worst;
}

/** Tolerance vs float64 (relative to the magnitude of the terms): f32 as the layer tests; 16-bit activations and int8 activations round. */
function tolerance(c: LayerCase): number {
  if (c.wfmt === 'w8a8' || c.dq) return 2e-2;
  if (c.dataType === 'bf16') return 2e-2;
  if (c.dataType === 'f16') return 2e-3;
  return 2e-5;
}

const sameBits = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

export interface Engines { readonly cpu: Engine; readonly gpu: GpuEngine }

/** Runs one layer case; returns the mismatches (empty: agreed), or `refused: ...` when the pd refused it. */
export async function checkLayerCase(eng: Engines, c: LayerCase): Promise<string[]> {
  const d = layerData(c);
  const bad: string[] = [];
  const ids = c.repeatIds ? repeatedIds(c) : undefined;
  const run = async (e: AnyEngine): Promise<LayerRun | string> => {
    try {
      return await runLayerCase(e, c, d, d.logits, ids);
    } catch (err) {
      if (err instanceof DnnlError && /moe\.layer: |no implementation|not supported|unimplemented/.test(err.message) && err.status !== 'runtime_error') return `refused (${err.status}): ${err.message}`;
      return `threw: ${err instanceof Error ? err.stack ?? err.message : String(err)}`;
    }
  };
  const cpuR = await run(eng.cpu);
  const gpuR = await run(eng.gpu);
  if (typeof cpuR === 'string' || typeof gpuR === 'string') {
    if (typeof cpuR === 'string' && typeof gpuR === 'string' && cpuR.startsWith('refused') && gpuR.startsWith('refused')) return [`refused both: ${cpuR}`];
    // One engine refusing (unimplemented) what the other runs: reported apart, not a mismatch.
    if (typeof cpuR === 'string' && cpuR.startsWith('refused (unimplemented)') && typeof gpuR !== 'string') return [`refused cpu only: ${cpuR}`];
    if (typeof gpuR === 'string' && gpuR.startsWith('refused (unimplemented)') && typeof cpuR !== 'string') return [`refused gpu only: ${gpuR}`];
    if (typeof cpuR === 'string') bad.push(`cpu ${cpuR}`);
    if (typeof gpuR === 'string') bad.push(`gpu ${gpuR}`);
    return bad;
  }
  const ref = routeRef(c, d);
  if (ids && (cpuR.ids.join() !== ids.join() || gpuR.ids.join() !== ids.join())) bad.push('repeated ids: the workspace does not hold the ids written');
  for (let t = 0; t < c.T; t++) {
    const sl = (a: ArrayLike<number>): number[] => Array.from(a).slice(t * c.k, (t + 1) * c.k);
    if (ref.nearTie[t] || ids) continue;
    if (sl(cpuR.ids).join() !== sl(ref.ids).join()) bad.push(`routing token ${t}: cpu ids [${sl(cpuR.ids)}], float64 [${sl(ref.ids)}] (logits [${Array.from(d.logits).slice(t * c.E, (t + 1) * c.E)}])`);
    if (sl(gpuR.ids).join() !== sl(cpuR.ids).join()) bad.push(`routing token ${t}: gpu ids [${sl(gpuR.ids)}], cpu [${sl(cpuR.ids)}]`);
    // 16-bit logits are exact values: the routing weights are f32 either way.
    for (let s = 0; s < c.k; s++) {
      const i = t * c.k + s;
      if (sl(cpuR.ids).join() !== sl(ref.ids).join()) break;
      for (const [name, w] of [['cpu', cpuR.w], ['gpu', gpuR.w]] as const) {
        if (!(Math.abs(w[i] - ref.weights[i]) <= 2e-6 * Math.abs(ref.weights[i]) + 1e-30)) bad.push(`routing token ${t} slot ${s}: ${name} weight ${w[i]}, float64 ${ref.weights[i]}`);
      }
    }
    if (bad.length > 8) break;
  }
  const tol = tolerance(c);
  for (const [name, r] of [['cpu', cpuR], ['gpu', gpuR]] as const) {
    const err = layerError(c, d, r);
    if (!(err < tol)) bad.push(`${name} layer vs float64: worst rel err ${err.toExponential(2)} > ${tol} (${r.impl.join(' ')})`);
  }
  const again = await run(eng.gpu);
  if (typeof again === 'string') bad.push(`gpu second run ${again}`);
  else if (!sameBits(again.out, gpuR.out) || again.ids.join() !== gpuR.ids.join()) bad.push('gpu: a second run gave different bits');
  if (c.T > 0) bad.push(...(await checkBadInput(eng, c, d)));
  return bad;
}

/** Ids with one expert in every slot of every third token, random (repeats allowed) elsewhere. */
function repeatedIds(c: LayerCase): Int32Array {
  const rng = mulberry32(c.dataSeed ^ 0x5bd1e995);
  const ids = Int32Array.from({ length: c.T * c.k }, () => int(rng, 0, c.E - 1));
  for (let t = 0; t < c.T; t += 3) ids.fill(t % c.E, t * c.k, (t + 1) * c.k);
  return ids;
}

/** Bad runtime data given to `run`: a DnnlError (message matching `pattern`) at wait on both engines, the guarded input untouched. */
async function expectRuntimeError(eng: Engines, what: string, pattern: RegExp, run: (e: AnyEngine) => Promise<unknown>): Promise<string[]> {
  const bad: string[] = [];
  for (const [name, e] of [['cpu', eng.cpu], ['gpu', eng.gpu]] as const) {
    try {
      await run(e);
      bad.push(`${name}: ${what} ran without an error`);
    } catch (err) {
      if (!(err instanceof DnnlError) || !pattern.test(err.message)) bad.push(`${name}: ${what} threw ${String(err)}`);
      const x = err as { w13Before?: Float64Array; w13After?: Float64Array };
      if (x.w13Before && x.w13After && x.w13Before.some((v, i) => !Object.is(v, x.w13After![i]))) bad.push(`${name}: ${what} changed the weights`);
    }
  }
  return bad;
}

/** A NaN logit, a non-finite correction bias, an expert map entry outside [-1, G): errors at wait. */
async function checkBadInput(eng: Engines, c: LayerCase, d: LayerData): Promise<string[]> {
  const logits = Float64Array.from(d.logits);
  logits[Math.floor(c.T / 2) * c.E + (c.E - 1)] = Number.NaN;
  const bad = await expectRuntimeError(eng, 'a NaN logit', /NaN/, (e) => runLayerCase(e, c, d, logits));
  if (d.cbias) {
    const cbias = Float64Array.from(d.cbias);
    cbias[c.E - 1] = Number.POSITIVE_INFINITY;
    bad.push(...(await expectRuntimeError(eng, 'an infinite correction bias', /correction_bias/i, (e) => runLayerCase(e, c, { ...d, cbias }))));
  }
  if (d.map) {
    const map = Int32Array.from(d.map);
    map[map.findIndex((v) => v >= 0)] = c.G + 3;
    bad.push(...(await expectRuntimeError(eng, `an expert map entry ${c.G + 3} >= G`, /expert_map/i, (e) => runLayerCase(e, c, d, d.logits, undefined, map))));
  }
  return bad;
}

// ---------------------------------------------------------------------------------------------------
// Stage fuzz: routing alone and dispatch alone.

/** `extreme`: logits from far outside the usual range (-inf, sigmoid underflow, softmax's max-shift). */
export interface RoutingCase { readonly T: number; readonly E: number; readonly options: RoutingOptions; readonly ties: boolean; readonly extreme: boolean; readonly dataSeed: number; readonly dataType: 'f32' | 'bf16' | 'f16' }

export function genRoutingCase(rng: Rng): RoutingCase {
  const c = genLayerCase(rng);
  return { T: rng() < 0.3 ? int(rng, 41, 300) : c.T, E: rng() < 0.2 ? int(rng, 13, 64) : c.E, options: { topK: c.k, ...c.routing }, ties: c.ties, extreme: c.dataType === 'f32' && rng() < 0.3, dataSeed: c.dataSeed, dataType: c.dataType };
}

async function runRouting(eng: AnyEngine, c: RoutingCase, logits: Float64Array, bias: Float64Array | undefined): Promise<{ ids: Int32Array; w: Float32Array }> {
  const md = memory.desc([c.T, c.E], c.dataType, tag.ab);
  const pd = new moe.routing.PrimitiveDesc(eng, md, c.options);
  const strm = new Stream(eng);
  const ids = Memory.create(pd.queryMd('topk_ids')!, eng), w = Memory.create(pd.queryMd('topk_weights')!, eng);
  const args: Record<number, AnyMemory> = { [ARG.SRC]: plainMem(eng, [c.T, c.E], logits, c.dataType), [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: w };
  if (bias) args[ARG.MOE_CORRECTION_BIAS] = plainMem(eng, [c.E], bias);
  (new moe.routing.Primitive(pd) as unknown as { execute(s: Stream, a: Record<number, AnyMemory>): void }).execute(strm, args);
  await strm.wait();
  return { ids: Int32Array.from(await readAll(ids)), w: Float32Array.from(await readAll(w)) };
}

export async function checkRoutingCase(eng: Engines, c0: RoutingCase): Promise<string[]> {
  // Options valid for this E: re-derive groups when E changed.
  const o = c0.options;
  const E = c0.E, topK = Math.min(o.topK, E);
  const g = o.groupCount && E % o.groupCount === 0 && topK <= (o.kGroup ?? 1) * (E / o.groupCount) && ((o.groupSelectMode ?? 0) === 0 || E / o.groupCount >= 2) ? o : { ...o, groupCount: 1, kGroup: 1, groupSelectMode: 0 as const };
  const c: RoutingCase = { ...c0, options: { ...g, topK } };
  const rng = mulberry32(c.dataSeed);
  const tieSet = [-2, -0.5, 0, 0.75, 1.5];
  const far = [-Infinity, -1e30, -1e4, -200, -100, -30, 0, 30, 100, 1e4, 1e30, ...(c.options.scoring === 'sigmoid' ? [Infinity] : [])];
  const logits = c.extreme ? Float64Array.from({ length: c.T * E }, () => Math.fround(pick(rng, far) * (rng() < 0.5 ? 1 : 1 + int(rng, 1, 8) / 64)))
    : c.ties ? Float64Array.from({ length: c.T * E }, () => pick(rng, tieSet)) : Float64Array.from({ length: c.T * E }, () => (c.dataType === 'f32' ? Math.fround((rng() * 2 - 1) * 4) : int(rng, -64, 64) / 16));
  // A softmax token whose logits are all -inf is bad input (an error by the contract): keep one finite.
  for (let t = 0; t < c.T; t++) if (logits.subarray(t * E, (t + 1) * E).every((v) => v === -Infinity)) logits[t * E] = 0;
  const bias = c.options.correctionBias ? Float64Array.from({ length: E }, () => (c.ties ? pick(rng, [0, 0.25]) : Math.fround(rng() * 0.2))) : undefined;
  const lc = { T: c.T, E, k: topK, routing: c.options } as unknown as LayerCase;
  const ref = routeRef(lc, { logits, cbias: bias } as LayerData);
  const bad: string[] = [];
  const runs: Record<string, { ids: Int32Array; w: Float32Array }> = {};
  for (const [name, e] of [['cpu', eng.cpu], ['gpu', eng.gpu]] as const) {
    try {
      runs[name] = await runRouting(e, c, logits, bias);
    } catch (err) {
      bad.push(`${name} routing threw ${String(err)}`);
    }
  }
  for (const [name, r] of Object.entries(runs)) {
    for (let t = 0; t < c.T && bad.length < 8; t++) {
      if (ref.nearTie[t]) continue;
      const a = Array.from(r.ids.subarray(t * topK, (t + 1) * topK)), b = Array.from(ref.ids.subarray(t * topK, (t + 1) * topK));
      if (a.join() !== b.join()) {
        bad.push(`routing ${name} token ${t}: ids [${a}], float64 [${b}]`);
        continue;
      }
      for (let i = t * topK; i < (t + 1) * topK; i++) if (!(Math.abs(r.w[i] - ref.weights[i]) <= 2e-6 * Math.abs(ref.weights[i]) + 1e-30)) bad.push(`routing ${name} token ${t}: weight ${r.w[i]}, float64 ${ref.weights[i]}`);
    }
  }
  return bad;
}

export interface DispatchCase { readonly o: { T: number; E: number; k: number; G: number; K: number; block: number; batched: boolean; cap: number; hidden: boolean; hdt: 'f32' | 'bf16' | 'f16' }; readonly repeats: boolean; readonly badId: boolean; readonly dataSeed: number }

export function genDispatchCase(rng: Rng): DispatchCase {
  const E = int(rng, 1, 20), k = int(rng, 1, Math.min(E, 6)), T = rng() < 0.1 ? 0 : int(rng, 1, 60);
  const G = rng() < 0.6 ? E : int(rng, 1, E);
  const batched = rng() < 0.3;
  return {
    o: { T, E, k, G, K: int(rng, 1, 40), block: batched ? 1 : pick(rng, [1, 1, 2, 4, 16]), batched, cap: batched ? (rng() < 0.3 ? int(rng, 1, Math.max(1, T)) : T) : 0, hidden: rng() < 0.7, hdt: pick(rng, ['f32', 'f32', 'bf16', 'f16'] as const) },
    repeats: rng() < 0.3, badId: rng() < 0.15, dataSeed: Math.floor(rng() * 2 ** 31),
  };
}

function dispatchOptions(c: DispatchCase): DispatchOptions {
  const o = c.o;
  return {
    tokens: o.T, topK: o.k, experts: o.E, ...(o.G !== o.E ? { localExperts: o.G } : {}), ...(o.hidden ? { hidden: memory.desc([o.T, o.K], o.hdt, tag.ab) } : {}),
    ...(o.block > 1 ? { alignBlockSize: o.block } : {}), ...(o.batched ? { format: 'batched' as const, maxTokens: Math.max(1, o.cap) } : {}),
  };
}

async function runDispatch(eng: AnyEngine, c: DispatchCase, ids: Int32Array, hidden: Float64Array, map: Int32Array | undefined): Promise<Record<string, number[]>> {
  const pd = new moe.dispatch.PrimitiveDesc(eng, dispatchOptions(c));
  const q = (w: Parameters<moe.dispatch.PrimitiveDesc['queryMd']>[0]): MemoryDesc | undefined => pd.queryMd(w);
  const filled = (md: MemoryDesc, v: number): AnyMemory => {
    const m = Memory.create(md, eng);
    return m.elementCount ? m.write(new Float64Array(m.elementCount).fill(v)) : m;
  };
  const outs: Record<string, AnyMemory> = { tokenIndex: filled(q('token_index')!, 77), tokenKs: filled(q('token_ks')!, 77), rowOf: filled(q('row_of')!, 77) };
  if (q('dst')) outs.dst = filled(q('dst')!, c.o.hidden ? -5 : 77);
  if (q('expert_num_tokens')) outs.counts = filled(q('expert_num_tokens')!, 77);
  const idsM = Memory.create(q('topk_ids')!, eng);
  if (ids.length) idsM.write(ids);
  const args: Record<number, AnyMemory | undefined> = {
    [ARG.MOE_TOPK_IDS]: idsM, [ARG.SRC]: c.o.hidden ? plainMem(eng, [c.o.T, c.o.K], hidden, c.o.hdt) : undefined, [ARG.MOE_EXPERT_MAP]: map && plainMem(eng, [c.o.E], map, dt.s32),
    [ARG.DST]: outs.dst, [ARG.MOE_TOKEN_INDEX]: outs.tokenIndex, [ARG.MOE_TOKEN_KS]: outs.tokenKs, [ARG.MOE_ROW_OF]: outs.rowOf, [ARG.MOE_EXPERT_NUM_TOKENS]: outs.counts,
  };
  const strm = new Stream(eng);
  (new moe.dispatch.Primitive(pd) as unknown as { execute(s: Stream, a: Record<number, AnyMemory | undefined>): void }).execute(strm, args);
  let error: string | undefined;
  try {
    await strm.wait();
  } catch (e) {
    error = e instanceof DnnlError ? `DnnlError(${e.status})` : `threw ${String(e)}`;
  }
  const r: Record<string, number[]> = {};
  for (const [n, m] of Object.entries(outs)) r[n] = Array.from(await readAll(m));
  if (outs.dst?.desc.isGrouped) r.offsets = Array.from(outs.dst instanceof GpuMemory ? await outs.dst.readOffsets() : (outs.dst as Memory).offsets);
  if (error) r.error = [0];
  return { ...r, ...(error ? { errorText: [error.length] } : {}) };
}

export async function checkDispatchCase(eng: Engines, c: DispatchCase): Promise<string[]> {
  const rng = mulberry32(c.dataSeed);
  const { T, E, k, G, K } = c.o;
  const ids = randomIds(rng, T, E, k, rng() < 0.3 ? 0 : undefined);
  if (c.repeats) for (let t = 0; t < T; t += 2) ids.fill(ids[t * k], t * k, (t + 1) * k);
  if (c.badId && T > 0) ids[int(rng, 0, T * k - 1)] = pick(rng, [E, -1, E + 100, -5]);
  const hidden = Float64Array.from({ length: T * K }, () => int(rng, -64, 64) / 8);
  let map: Int32Array | undefined;
  if (G !== E) {
    const perm = [...Array(E).keys()].sort(() => rng() - 0.5).slice(0, G);
    map = new Int32Array(E).fill(-1);
    perm.forEach((e, l) => { map![e] = l; });
  }
  const bad: string[] = [];
  const runs: Record<string, Record<string, number[]>> = {};
  for (const [name, e] of [['cpu', eng.cpu], ['gpu', eng.gpu]] as const) {
    try {
      runs[name] = await runDispatch(e, c, ids, hidden, map);
    } catch (err) {
      bad.push(`${name} dispatch threw at execute ${String(err)}`);
    }
  }
  if (bad.length) return bad;
  // Bad runtime data: an id outside [0, E), a repeat in the batched format, a batched expert over its capacity.
  const perExpert = new Map<number, number>();
  for (const e of ids) if (e >= 0 && e < E && (!map || map[e] >= 0)) perExpert.set(e, (perExpert.get(e) ?? 0) + 1);
  const overCap = c.o.batched && [...perExpert.values()].some((n) => n > Math.max(1, c.o.cap));
  const expectError = T > 0 && (c.badId || (c.o.batched && c.repeats && k > 1) || overCap);
  for (const [name, r] of Object.entries(runs)) {
    if (expectError !== !!r.error) bad.push(`dispatch ${name}: ${expectError ? 'bad id without an error' : 'error on good ids'}`);
    if (expectError) {
      // Nothing written: every output keeps its sentinel.
      for (const [n, v] of Object.entries(r)) if (n !== 'error' && n !== 'errorText' && n !== 'offsets' && v.some((x) => x !== 77 && x !== -5)) bad.push(`dispatch ${name}: ${n} written despite a bad id`);
      continue;
    }
    if (c.o.batched) {
      const rows: number[][] = Array.from({ length: G }, () => []);
      for (let t = 0; t < T; t++) for (let s = 0; s < k; s++) {
        const l = map ? map[ids[t * k + s]] : ids[t * k + s];
        if (l >= 0) rows[l].push(t);
      }
      if (r.counts.join() !== rows.map((x) => x.length).join()) bad.push(`dispatch ${name} batched counts [${r.counts}] want [${rows.map((x) => x.length)}]`);
      continue;
    }
    const ref = refPlace(ids, T, k, G, map, c.o.block);
    const offs = r.offsets ?? (c.o.hidden ? undefined : r.dst);
    if (offs && offs.join() !== ref.offs.join()) bad.push(`dispatch ${name}: offsets [${offs}] want [${ref.offs}]`);
    ref.rows.forEach((rows, g) => rows.forEach(([t, s], i) => {
      const row = ref.offs[g] + i;
      if (r.tokenIndex[row] !== t || r.tokenKs[row] !== s || r.rowOf[t * k + s] !== row) bad.push(`dispatch ${name}: row ${row} = (${r.tokenIndex[row]}, ${r.tokenKs[row]}), want (${t}, ${s})`);
      if (c.o.hidden && r.dst && r.dst.slice(row * K, (row + 1) * K).join() !== Array.from(hidden.subarray(t * K, (t + 1) * K)).join()) bad.push(`dispatch ${name}: row ${row} values`);
    }));
  }
  if (runs.cpu && runs.gpu && JSON.stringify(runs.cpu) !== JSON.stringify(runs.gpu) && !expectError) bad.push('dispatch: gpu outputs differ from the cpu engine\'s');
  return bad.slice(0, 8);
}

// ---------------------------------------------------------------------------------------------------

export type StageKind = 'layer' | 'routing' | 'dispatch';

export interface FuzzResult { readonly index: number; readonly stage: StageKind; readonly config: unknown; readonly problems: string[] }

/** Case `index` of `seed`: each case has its own generator, so `--only=i` reproduces it alone. */
export function caseOf(seed: number, index: number, stage: StageKind): unknown {
  const rng = mulberry32((seed * 1000003 + index * 7919 + (stage === 'layer' ? 0 : stage === 'routing' ? 1 : 2)) >>> 0);
  return stage === 'layer' ? genLayerCase(rng) : stage === 'routing' ? genRoutingCase(rng) : genDispatchCase(rng);
}

export async function fuzzOne(eng: Engines, seed: number, index: number, stage: StageKind): Promise<FuzzResult> {
  const config = caseOf(seed, index, stage);
  const problems = stage === 'layer' ? await checkLayerCase(eng, config as LayerCase) : stage === 'routing' ? await checkRoutingCase(eng, config as RoutingCase) : await checkDispatchCase(eng, config as DispatchCase);
  return { index, stage, config, problems };
}

async function main(): Promise<void> {
  const arg = (name: string, dflt: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt;
  const seed = Number(arg('seed', '1')), count = Number(arg('count', '20'));
  const stages = arg('stages', 'layer,routing,dispatch').split(',') as StageKind[];
  const only = arg('only', '');
  useSwiftShaderWithoutDriver();
  const eng: Engines = { cpu: await Engine.create({ threads: 1 }), gpu: await Engine.create({ kind: 'gpu' }) };
  const tally = { ok: 0, refused: 0, failed: 0 };
  const refusals = new Map<string, number>();
  const indices = only ? only.split(',').map(Number) : [...Array(count).keys()];
  for (const stage of stages) {
    for (const i of indices) {
      const r = await fuzzOne(eng, seed, i, stage);
      const refused = r.problems.length === 1 && r.problems[0].startsWith('refused ');
      if (refused) {
        tally.refused++;
        const key = r.problems[0].replace(/\d+/g, 'N').slice(0, 160);
        refusals.set(key, (refusals.get(key) ?? 0) + 1);
      } else if (r.problems.length) {
        tally.failed++;
        console.log(`FAIL ${stage} seed=${seed} index=${i} (rerun: --seed=${seed} --stages=${stage} --only=${i})\n  config: ${JSON.stringify(r.config)}`);
        for (const p of r.problems.slice(0, 8)) console.log(`  - ${p.split('\n').slice(0, 4).join('\n    ')}`);
      } else tally.ok++;
    }
  }
  for (const [k, n] of refusals) console.log(`refused x${n}: ${k}`);
  console.log(`seed ${seed}: ${indices.length} cases x [${stages}]: ${tally.ok} ok, ${tally.refused} refused, ${tally.failed} failed`);
  eng.cpu.release();
  eng.gpu.release();
  process.exitCode = tally.failed ? 1 : 0;
}

if (process.argv[1]?.endsWith('moe_fuzz.ts')) await main();
