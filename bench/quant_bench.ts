/**
 * `npm run bench -- --mode=quant`: the fused kernel paths against the plain f32 grouped matmul on the
 * same workload (default moe-b), samples interleaved round-robin so that load drift hits every variant
 * alike:
 *   f32         f32 x f32 (packed) -> f32, N columns: the baseline
 *   int8        s8 x s8 (x8:p8 packed, the weight-only layout) -> f32, src scales per row, weights scales per column
 *   f32+fused   f32 x f32 (packed) -> f32, src scales per row, weights per column, bias, swiglu
 *               (GLU halves: N GEMM columns -> N/2 dst columns; same GEMM work as the baseline)
 *   int8+fused  the same epilogue on the int8 path
 * Ratios: (a) int8 GOP/s / f32 GFLOP/s (target >= 1.6); (b) f32+fused time / f32 time (target <= 1.10).
 * GFLOP/s count the GEMM's useful work 2 * sum(Mg) * K * N for every variant.
 */
import {
  ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, algorithm, dt, matmul, memory, reorder, tag, type DataType,
} from '../src/index.js';
import { packedWeightsDesc } from '../src/memory/packed_weights.js';
import { fillRandom, type Timing } from './timing.js';
import { usefulFlops, type Workload } from './workloads.js';

export interface QuantRow {
  workload: string;
  variant: string;
  impl: string;
  threads: number;
  median_ms: number;
  min_ms: number;
  max_ms: number;
  gflops: number;
  /** Every sample (ms), in run order: sample i of each variant ran in the same round. */
  samples: number[];
  /** max |out - ref| / max |ref| against a float64 matmul of the f32 src and the dequantized weights (weight-only int variants). */
  error?: number;
}

interface Variant {
  readonly name: string;
  /** s8 src (and s8 weights unless `wei` says otherwise): the integer path. */
  readonly int8: boolean;
  /** Per-row src and per-column weights scales. */
  readonly scales: boolean;
  /** Bias and swiglu (GLU halves). */
  readonly fused: boolean;
  /** Weights data type (default: s8 when int8, else f32). */
  readonly wei?: DataType;
  /** Weights scales varying along K in blocks of `k` (data type `dt`), instead of per column. */
  readonly kBlock?: { readonly k: number; readonly dt: DataType };
  /** Weights form, overriding --weights (`abc` / `acb`: plain user layouts). */
  readonly form?: string;
  /**
   * Packed weights without their scales (the codes-only x8 / x4 layout of a pd without weights
   * scales): the scales come at execution, as before issue 12's `+q` layouts (in-process A/B).
   */
  readonly runtimeScales?: boolean;
  /** attr.setDynamicQuantization(ARG.SRC, s8): f32 src quantized per row at execution, integer path (rfcs/0006). */
  readonly dynamic?: boolean;
  /** Runs with the kernels' set_dq_quad(0): the former 3x8 integer decode kernels, for an in-process A/B (issue 19). */
  readonly former?: boolean;
  /** Runs with the kernels' set_dq_quad(1): the SIMD128 int16 decode kernels even where relaxed SIMD's i16x8 dot runs (in-process A/B). */
  readonly quadOnly?: boolean;
  /** attr accumulation_mode relaxed (rfcs/0007): the reordered decode kernels on the same packed weights. */
  readonly relaxed?: boolean;
  /** bf16 / f16 weights reordered into an explicit `f32:p8` descriptor: what tag.any gave before `x16:p8` (in-process A/B). */
  readonly f32Panels?: boolean;
}

/** The measured variants; the extra ones (`--variants=`) split the fused cost into its parts. */
export const VARIANTS: readonly Variant[] = [
  { name: 'f32', int8: false, scales: false, fused: false },
  { name: 'int8', int8: true, scales: true, fused: false },
  /** W4A8: s8 src x s4 weights (x4:p8k2 packed) on the integer path, per-row / per-column scales. */
  { name: 'int8w4', int8: true, scales: true, fused: false, wei: dt.s4 },
  { name: 'f32+fused', int8: false, scales: true, fused: true },
  { name: 'int8+fused', int8: true, scales: true, fused: true },
  { name: 'f32+scales', int8: false, scales: true, fused: false },
  { name: 'f32+glu', int8: false, scales: false, fused: true },
  // issue 12: every weight format against f32 packed (`--variants=f32,f32:abc,w8,w4,...`).
  { name: 'f32:abc', int8: false, scales: false, fused: false, form: 'abc' },
  { name: 'f32:acb', int8: false, scales: false, fused: false, form: 'acb' },
  /** Weight-only int8: s8 weights, per-column scales, f32 activations. */
  { name: 'w8', int8: false, scales: true, fused: false, wei: dt.s8 },
  /** Weight-only int4: s4 weights, per-column scales. */
  { name: 'w4', int8: false, scales: true, fused: false, wei: dt.s4 },
  /** Weight-only int4 with K-blocks of 32 (f32 scales), as onnxruntime's MatMulNBits block 32. */
  { name: 'w4k32', int8: false, scales: true, fused: false, wei: dt.s4, kBlock: { k: 32, dt: dt.f32 } },
  /** Weight-only int8 with K-blocks of 32 (f32 scales). */
  { name: 'w8k32', int8: false, scales: true, fused: false, wei: dt.s8, kBlock: { k: 32, dt: dt.f32 } },
  /** fp8 e4m3 weights, per-column scales. */
  { name: 'fp8', int8: false, scales: true, fused: false, wei: dt.f8_e4m3 },
  { name: 'fp8e5m2', int8: false, scales: true, fused: false, wei: dt.f8_e5m2 },
  /** MXFP4: f4_e2m1 weights, e8m0 scales per 32 K. */
  { name: 'mxfp4', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 32, dt: dt.e8m0 } },
  /** NVFP4 (block part): f4_e2m1 weights, f8_e4m3 scales per 16 K. */
  { name: 'nvfp4', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 16, dt: dt.f8_e4m3 } },
  // issue 19: the weight-only int formats with dynamic int8 activations (the same packed weights).
  { name: 'w8:dq', int8: false, scales: true, fused: false, wei: dt.s8, dynamic: true },
  { name: 'w4:dq', int8: false, scales: true, fused: false, wei: dt.s4, dynamic: true },
  { name: 'w4k32:dq', int8: false, scales: true, fused: false, wei: dt.s4, kBlock: { k: 32, dt: dt.f32 }, dynamic: true },
  // fp4 weights on the integer kernels: each e2m1 value v as the exact integer 2 v, the 0.5 in the block scales.
  { name: 'mxfp4:dq', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 32, dt: dt.e8m0 }, dynamic: true },
  { name: 'nvfp4:dq', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 16, dt: dt.f8_e4m3 }, dynamic: true },
  // The same on the former 1-2 row integer decode kernels (set_dq_quad(0): s16_dq_1x16w4 / 2x8w4 / 1x16w8 off; the same bits): in-process A/B.
  { name: 'w8:dq-3x8', int8: false, scales: true, fused: false, wei: dt.s8, dynamic: true, former: true },
  { name: 'w4:dq-3x8', int8: false, scales: true, fused: false, wei: dt.s4, dynamic: true, former: true },
  { name: 'w4k32:dq-3x8', int8: false, scales: true, fused: false, wei: dt.s4, kBlock: { k: 32, dt: dt.f32 }, dynamic: true, former: true },
  // The same on the SIMD128 int16 1-row kernel where relaxed SIMD's i16x8 dot (s8_dq_1x16w4r) would run (set_dq_quad(1); the same bits).
  { name: 'w4:dq-quad', int8: false, scales: true, fused: false, wei: dt.s4, dynamic: true, quadOnly: true },
  { name: 'w4k32:dq-quad', int8: false, scales: true, fused: false, wei: dt.s4, kBlock: { k: 32, dt: dt.f32 }, dynamic: true, quadOnly: true },
  { name: 'mxfp4:dq-quad', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 32, dt: dt.e8m0 }, dynamic: true, quadOnly: true },
  { name: 'nvfp4:dq-quad', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 16, dt: dt.f8_e4m3 }, dynamic: true, quadOnly: true },
  // issue 19: the exact formats with accumulation_mode relaxed (f32_gemm_1x16r decode tiles; the same packed weights).
  { name: 'w8:relaxed', int8: false, scales: true, fused: false, wei: dt.s8, relaxed: true },
  { name: 'w4:relaxed', int8: false, scales: true, fused: false, wei: dt.s4, relaxed: true },
  { name: 'w4k32:relaxed', int8: false, scales: true, fused: false, wei: dt.s4, kBlock: { k: 32, dt: dt.f32 }, relaxed: true },
  { name: 'w8k32:relaxed', int8: false, scales: true, fused: false, wei: dt.s8, kBlock: { k: 32, dt: dt.f32 }, relaxed: true },
  { name: 'mxfp4:relaxed', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 32, dt: dt.e8m0 }, relaxed: true },
  { name: 'nvfp4:relaxed', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 16, dt: dt.f8_e4m3 }, relaxed: true },
  // The same with the scales at execution on codes-only panels (`-rt`): what tag.any gave before the `+q` layouts.
  { name: 'w8-rt', int8: false, scales: true, fused: false, wei: dt.s8, runtimeScales: true },
  { name: 'w4-rt', int8: false, scales: true, fused: false, wei: dt.s4, runtimeScales: true },
  { name: 'w4k32-rt', int8: false, scales: true, fused: false, wei: dt.s4, kBlock: { k: 32, dt: dt.f32 }, runtimeScales: true },
  { name: 'fp8-rt', int8: false, scales: true, fused: false, wei: dt.f8_e4m3, runtimeScales: true },
  { name: 'mxfp4-rt', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 32, dt: dt.e8m0 }, runtimeScales: true },
  { name: 'nvfp4-rt', int8: false, scales: true, fused: false, wei: dt.f4_e2m1, kBlock: { k: 16, dt: dt.f8_e4m3 }, runtimeScales: true },
  // 16-bit float weights, no scales: tag.any keeps their codes (x16:p8, 2 bytes a weight) ...
  { name: 'bf16', int8: false, scales: false, fused: false, wei: dt.bf16 },
  { name: 'f16', int8: false, scales: false, fused: false, wei: dt.f16 },
  // ... where it gave f32:p8 panels (4 bytes a weight) before: the same bf16 values, in-process A/B.
  { name: 'bf16:f32p8', int8: false, scales: false, fused: false, wei: dt.bf16, f32Panels: true },
  { name: 'f16:f32p8', int8: false, scales: false, fused: false, wei: dt.f16, f32Panels: true },
];
const DEFAULT_VARIANTS = ['f32', 'int8', 'f32+fused', 'int8+fused'];

/** Bytes per weight of a data type (4-bit types: 0.5). */
const WEIGHT_BYTES: Partial<Record<DataType, number>> = { f32: 4, bf16: 2, f16: 2, s8: 1, u8: 1, f8_e4m3: 1, f8_e5m2: 1, s4: 0.5, u4: 0.5, f4_e2m1: 0.5 };
const SCALE_BYTES: Partial<Record<DataType, number>> = { f32: 4, e8m0: 1, f8_e4m3: 1 };

/** Bytes of weights (codes and their scales) one expert's matmul reads. */
export function expertWeightBytes(variant: string, K: number, N: number): number {
  const v = VARIANTS.find((x) => x.name === variant)!;
  const wdt = v.wei ?? (v.int8 ? dt.s8 : dt.f32);
  const codes = K * N * (v.f32Panels ? 4 : WEIGHT_BYTES[wdt]!);
  if (!v.scales) return codes;
  return codes + (v.kBlock ? Math.ceil(K / v.kBlock.k) * N * SCALE_BYTES[v.kBlock.dt]! : N * 4);
}

export interface Prepared {
  readonly run: () => Promise<void>;
  /** The output's error against a float64 reference (weight-only int variants), else undefined. */
  readonly error: () => number | undefined;
  readonly impl: string;
  readonly free: () => void;
  /** Frees what is only needed until the stream is idle (the plain weights once packed). */
  readonly dropTemps: () => void;
}

/** Weights shared by the variants that take the same layout (one MoE-B f32 copy is 738 MB). */
export type WeightsCache = Map<string, Memory>;

export function prepare(eng: Engine, strm: Stream, w: Workload, v: Variant, formArg: string, cache: WeightsCache): Prepared {
  let form = formArg;
  const E = w.sizes.length, T = w.sizes.reduce((a, b) => a + b, 0), { K, N } = w;
  const Nd = v.fused ? N / 2 : N;
  const sdt: DataType = v.int8 ? dt.s8 : dt.f32;
  const wdt: DataType = v.wei ?? sdt;
  form = v.form ?? form;
  const srcMd = memory.desc.grouped([T, K], sdt, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([T, Nd], dt.f32, E, [RUNTIME_DIM_VAL, Nd]);
  const userMd = memory.desc([E, K, N], wdt, tag.abc);
  const attr = new PrimitiveAttr();
  if (v.dynamic) attr.setDynamicQuantization(ARG.SRC, dt.s8);
  if (v.relaxed) attr.setAccumulationMode('relaxed');
  if (v.scales) {
    if (v.int8) attr.setScales(ARG.SRC, 1);
    if (v.kBlock) attr.setScales(ARG.WEIGHTS, 7, [1, v.kBlock.k, 1], v.kBlock.dt);
    else attr.setScales(ARG.WEIGHTS, 5);
  }
  if (v.fused) attr.postOps.appendGlu(algorithm.glu_swiglu, 'halves');
  const biasMd = v.fused ? memory.desc([E, N], dt.f32, tag.ab) : undefined;
  const anyMd = memory.desc([E, K, N], wdt, tag.any);
  // -rt: the codes-only packed layout (what a pd without weights scales picks), scales at execution.
  const codesMd = (): typeof anyMd => new matmul.PrimitiveDesc(eng, srcMd, anyMd, memory.desc.grouped([T, N], dt.f32, E, [RUNTIME_DIM_VAL, N])).queryMd('weights')!;
  const weiReq = form === 'packed' ? (v.f32Panels ? packedWeightsDesc([E, K, N]) : v.runtimeScales ? codesMd() : anyMd) : form === 'acb' ? memory.desc([E, K, N], wdt, tag.acb) : userMd;
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiReq, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiReq, dstMd, attr);
  const mems: Memory[] = [];
  const keep = <M extends Memory>(m: M): M => {
    mems.push(m);
    return m;
  };
  const src = keep(Memory.create(srcMd, eng));
  let acc = 0;
  src.offsets[0] = 0;
  w.sizes.forEach((s, i) => (src.offsets[i + 1] = acc += s));
  const dst = keep(Memory.create(dstMd, eng, [undefined, src.handles[1]]));
  const fill = (m: Memory, seed: number, scale: number): void => {
    const x = new Float32Array(m.elementCount);
    fillRandom(x, seed, scale);
    const t = m.desc.dataType;
    m.write(t === 'f32' || t === 'bf16' || t === 'f16' || t.startsWith('f8') || t.startsWith('f4') ? x : x.map(Math.round));
  };
  fill(src, 3, v.int8 ? 200 : 1);
  const host: { src?: Float32Array; wei?: Float32Array; sc?: Float32Array } = {};
  const intWeightOnly = !v.int8 && (wdt === dt.s8 || wdt === dt.s4 || wdt === dt.f4_e2m1) && v.scales && !v.fused;
  if (intWeightOnly) host.src = Float32Array.from(src.values as Float32Array);
  const wRange: Partial<Record<DataType, number>> = { s8: 200, u8: 200, s4: 14, u4: 14, f4_e2m1: 10, f8_e4m3: 50, f8_e5m2: 50 };
  const wmd = pd.queryMd('weights')!;
  const temps: Memory[] = [];
  const scales: Partial<Record<'src' | 'weights', Memory>> = {};
  for (const a of ['src', 'weights'] as const) {
    const md = pd.queryMd(`scales:${a}`);
    if (!md) continue;
    const m = keep(Memory.create(md, eng));
    const x = new Float32Array(m.elementCount);
    fillRandom(x, 6, 0.01);
    // e8m0 holds powers of two only; every other type rounds on write.
    m.write(md.dataType === 'e8m0' ? x.map((s) => 2 ** -Math.round(6 + 4 * Math.abs(s) / 0.01)) : x.map((s) => 0.005 + Math.abs(s)));
    scales[a] = m;
    // (the values the memory holds: e8m0 / f8_e4m3 round on write)
    if (a === 'weights' && intWeightOnly) host.sc = md.dataType === 'f32' ? x.map((s) => Math.fround(0.005 + Math.abs(s))) : Float32Array.from(m.read());
  }
  // `+q` layouts (tag.any with weights scales) store the scales: the reorder takes them, the matmul not.
  const embedded = wmd.packed?.quant?.scales !== undefined;
  if (intWeightOnly) { // the codes the weights hold (fill's values, rounded)
    const x = new Float32Array(E * K * N);
    fillRandom(x, 4, wRange[wdt] ?? 0.05);
    if (wdt === dt.f4_e2m1) { // the e2m1 values the write rounds them to
      const u = Memory.create(userMd, eng);
      temps.push(u);
      host.wei = Float32Array.from(u.write(x).read());
    } else host.wei = x.map(Math.round);
  }
  // (f32 panels of bf16 / f16 values are not the f32 variant's panels, though their descriptors are equal)
  const cacheKey = `${wmd}<-${wdt}`;
  let wei = cache.get(cacheKey);
  if (!wei) {
    const user = Memory.create(userMd, eng);
    fill(user, 4, wRange[wdt] ?? 0.05);
    wei = user;
    if (!wmd.equals(userMd)) {
      wei = Memory.create(wmd, eng);
      const r: Record<number, Memory> = { [ARG.FROM]: user, [ARG.TO]: wei };
      if (embedded) r[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales.weights!;
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, userMd, wmd)).execute(strm, r);
      temps.push(user);
    }
    cache.set(cacheKey, wei);
  }
  const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  if (biasMd) {
    const b = keep(Memory.create(biasMd, eng));
    fill(b, 5, 0.1);
    args[ARG.BIAS] = b;
  }
  if (scales.src) args[ARG.ATTR_SCALES | ARG.SRC] = scales.src;
  if (scales.weights && !embedded) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales.weights;
  const prim = new matmul.Primitive(pd);
  return {
    impl: pd.implInfo,
    run: async () => {
      if (v.former || v.quadOnly) eng.kernels?.set_dq_quad(v.former ? 0 : 1);
      prim.execute(strm, args);
      await strm.wait();
      if (v.former || v.quadOnly) eng.kernels?.set_dq_quad(2);
    },
    error: () => {
      if (!host.src || !host.wei || !host.sc) return undefined;
      const out = dst.values as Float32Array, xs = host.src, ws = host.wei, sc = host.sc;
      const blk = v.kBlock?.k ?? K, nb = Math.ceil(K / blk);
      let maxErr = 0, maxRef = 0, r0 = 0;
      const col = new Float64Array(K);
      w.sizes.forEach((rows, g) => {
        for (let n = 0; n < N && rows > 0; n++) {
          for (let k = 0; k < K; k++) col[k] = ws[(g * K + k) * N + n] * sc[(g * nb + Math.floor(k / blk)) * N + n];
          for (let r = r0; r < r0 + rows; r++) {
            let ref = 0;
            for (let k = 0; k < K; k++) ref += xs[r * K + k] * col[k];
            maxErr = Math.max(maxErr, Math.abs(out[r * N + n] - ref));
            maxRef = Math.max(maxRef, Math.abs(ref));
          }
        }
        r0 += rows;
      });
      return maxErr / maxRef;
    },
    free: () => mems.forEach((m) => m.free()),
    dropTemps: () => temps.splice(0).forEach((m) => m.free()),
  };
}

function stats(t: number[]): Timing {
  const x = [...t].sort((p, q) => p - q);
  return { median: x[x.length >> 1], min: x[0], max: x[x.length - 1], runs: x.length };
}

/** Times every variant on one engine, samples interleaved; returns one row per variant. */
export async function quantBench(w: Workload, threads: number, isa: 'auto' | 'simd128' | 'relaxed', minMs: number, form: string,
  only?: readonly string[], clock: 'wall' | 'cpu' = 'wall', relaxedDot = false): Promise<QuantRow[]> {
  // cpu: process CPU time (user + system) of each sample, which a time-shared core does not inflate;
  // meaningful at 1 thread (the kernels run on the calling thread).
  const cpuMs = (): number => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const clockMs = clock === 'cpu' ? cpuMs : () => performance.now();
  const eng = await Engine.create({ threads, kernels: isa, relaxedDot });
  const strm = new Stream(eng);
  await strm.wait();
  const variants = VARIANTS.filter((v) => (only ?? DEFAULT_VARIANTS).includes(v.name));
  const preps: Prepared[] = [];
  const cache: WeightsCache = new Map();
  for (const v of variants) {
    preps.push(prepare(eng, strm, w, v, form, cache));
    await strm.wait();
    preps[preps.length - 1].dropTemps();
  }
  const samples: number[][] = preps.map(() => []);
  for (let i = 0; i < 2; i++) for (const p of preps) await p.run();
  const t0 = performance.now();
  while (samples[0].length < 9 || (performance.now() - t0 < minMs * preps.length && samples[0].length < 200)) {
    for (let i = 0; i < preps.length; i++) {
      const s = clockMs();
      await preps[i].run();
      samples[i].push(clockMs() - s);
    }
  }
  const flops = usefulFlops(w);
  const rows = preps.map((p, i): QuantRow => {
    const t = stats(samples[i]);
    return { workload: w.name, variant: variants[i].name, impl: p.impl, threads, median_ms: t.median, min_ms: t.min, max_ms: t.max, gflops: flops / t.median / 1e6, samples: samples[i], error: p.error() };
  });
  preps.forEach((p) => p.free());
  cache.forEach((m) => m.free());
  eng.release();
  return rows;
}

/**
 * Time of `num` over time of `den`: the median of the per-round ratios (both ran back to back in every
 * round, so interference that comes and goes cancels), not the ratio of the medians.
 */
export function pairedRatio(num: QuantRow, den: QuantRow): number {
  const r = num.samples.map((t, i) => t / den.samples[i]).sort((x, y) => x - y);
  return r[r.length >> 1];
}

/** The two targets of the fused kernels, from one run's rows (paired ratios of times). */
export function quantRatios(rows: readonly QuantRow[]): { a: number; b: number; fusedInt8: number } {
  const get = (v: string): QuantRow => rows.find((r) => r.variant === v)!;
  return {
    a: pairedRatio(get('f32'), get('int8')),
    b: pairedRatio(get('f32+fused'), get('f32')),
    fusedInt8: pairedRatio(get('int8+fused'), get('int8')),
  };
}
