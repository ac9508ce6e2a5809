/**
 * `npm run bench -- --mode=quant`: the fused kernel paths against the plain f32 grouped matmul on the
 * same workload (default moe-b), samples interleaved round-robin so that load drift hits every variant
 * alike:
 *   f32         f32 x f32 (packed) -> f32, N columns: the baseline
 *   int8        s8 x s8 (s16:p8k2 packed) -> f32, src scales per row, weights scales per column
 *   f32+fused   f32 x f32 (packed) -> f32, src scales per row, weights per column, bias, swiglu
 *               (GLU halves: N GEMM columns -> N/2 dst columns; same GEMM work as the baseline)
 *   int8+fused  the same epilogue on the int8 path
 * Ratios: (a) int8 GOP/s / f32 GFLOP/s (target >= 1.6); (b) f32+fused time / f32 time (target <= 1.10).
 * GFLOP/s count the GEMM's useful work 2 * sum(Mg) * K * N for every variant.
 */
import {
  ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, algorithm, dt, matmul, memory, reorder, tag, type DataType,
} from '../src/index.js';
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
}

interface Variant {
  readonly name: string;
  readonly int8: boolean;
  /** Per-row src and per-column weights scales. */
  readonly scales: boolean;
  /** Bias and swiglu (GLU halves). */
  readonly fused: boolean;
}

/** The measured variants; the extra ones (`--variants=`) split the fused cost into its parts. */
export const VARIANTS: readonly Variant[] = [
  { name: 'f32', int8: false, scales: false, fused: false },
  { name: 'int8', int8: true, scales: true, fused: false },
  { name: 'f32+fused', int8: false, scales: true, fused: true },
  { name: 'int8+fused', int8: true, scales: true, fused: true },
  { name: 'f32+scales', int8: false, scales: true, fused: false },
  { name: 'f32+glu', int8: false, scales: false, fused: true },
];
const DEFAULT_VARIANTS = ['f32', 'int8', 'f32+fused', 'int8+fused'];

interface Prepared {
  readonly run: () => Promise<void>;
  readonly impl: string;
  readonly free: () => void;
  /** Frees what is only needed until the stream is idle (the plain weights once packed). */
  readonly dropTemps: () => void;
}

/** Weights shared by the variants that take the same layout (one MoE-B f32 copy is 738 MB). */
type WeightsCache = Map<string, Memory>;

function prepare(eng: Engine, strm: Stream, w: Workload, v: Variant, form: string, cache: WeightsCache): Prepared {
  const E = w.sizes.length, T = w.sizes.reduce((a, b) => a + b, 0), { K, N } = w;
  const Nd = v.fused ? N / 2 : N;
  const sdt: DataType = v.int8 ? dt.s8 : dt.f32;
  const srcMd = memory.desc.grouped([T, K], sdt, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([T, Nd], dt.f32, E, [RUNTIME_DIM_VAL, Nd]);
  const userMd = memory.desc([E, K, N], sdt, tag.abc);
  const attr = new PrimitiveAttr();
  if (v.scales) {
    attr.setScales(ARG.SRC, 1);
    attr.setScales(ARG.WEIGHTS, 5);
  }
  if (v.fused) attr.postOps.appendGlu(algorithm.glu_swiglu, 'halves');
  const biasMd = v.fused ? memory.desc([E, N], dt.f32, tag.ab) : undefined;
  const weiReq = form === 'packed' ? memory.desc([E, K, N], sdt, tag.any) : userMd;
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
    m.write(m.desc.dataType === 'f32' ? x : x.map(Math.round));
  };
  fill(src, 3, v.int8 ? 200 : 1);
  const wmd = pd.queryMd('weights')!;
  const temps: Memory[] = [];
  let wei = cache.get(wmd.toString());
  if (!wei) {
    const user = Memory.create(userMd, eng);
    fill(user, 4, v.int8 ? 200 : 0.05);
    wei = user;
    if (!wmd.equals(userMd)) {
      wei = Memory.create(wmd, eng);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, userMd, wmd)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei });
      temps.push(user);
    }
    cache.set(wmd.toString(), wei);
  }
  const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  if (biasMd) {
    const b = keep(Memory.create(biasMd, eng));
    fill(b, 5, 0.1);
    args[ARG.BIAS] = b;
  }
  for (const a of ['src', 'weights'] as const) {
    const md = pd.queryMd(`scales:${a}`);
    if (!md) continue;
    const m = keep(Memory.create(md, eng));
    const x = new Float32Array(m.elementCount);
    fillRandom(x, 6, 0.01);
    m.write(x.map((s) => 0.005 + Math.abs(s)));
    args[ARG.ATTR_SCALES | (a === 'src' ? ARG.SRC : ARG.WEIGHTS)] = m;
  }
  const prim = new matmul.Primitive(pd);
  return {
    impl: pd.implInfo,
    run: async () => {
      prim.execute(strm, args);
      await strm.wait();
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
  only?: readonly string[]): Promise<QuantRow[]> {
  const eng = await Engine.create({ threads, kernels: isa });
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
      const s = performance.now();
      await preps[i].run();
      samples[i].push(performance.now() - s);
    }
  }
  const flops = usefulFlops(w);
  const rows = preps.map((p, i): QuantRow => {
    const t = stats(samples[i]);
    return { workload: w.name, variant: variants[i].name, impl: p.impl, threads, median_ms: t.median, min_ms: t.min, max_ms: t.max, gflops: flops / t.median / 1e6, samples: samples[i] };
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
