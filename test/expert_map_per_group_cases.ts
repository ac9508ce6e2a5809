/**
 * Cases of a grouped matmul with attr.setExpertMap and operands of one value per *group* (src / dst
 * scales and zero points with mask 0, binary src1 [G, N] / [G, 1, N]) beside operands per *expert*
 * (weights, bias [E, N], weights scales [E, N] or K-blocked [E, K / kb, N]), run on any engine and
 * checked against a float64 expectation computed here from the definitions (no implementation code).
 * Shared by the cpu (expert_map_per_group.test.ts) and gpu (gpu_expert_map_per_group.test.ts) tests.
 */
import { expect } from 'vitest';
import {
  ARG, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, matmul, memory, tag, dt,
  type DataType, type Engine, type GpuEngine, type GpuMemory, type MemoryDesc, type Stream,
} from '../src/index.js';
import { mulberry32 } from './workloads.js';

export interface MapShape {
  readonly name: string;
  /** Rows per group. */
  readonly sizes: readonly number[];
  /** Expert of each group. */
  readonly map: readonly number[];
  /** Experts of the weights. */
  readonly E: number;
  readonly K: number;
  readonly N: number;
}

/**
 * Groups 0 and 2 (and 1 and 4) share an expert, group 1 is empty, one group spans several M tiles;
 * more groups than experts. Then more experts than groups (map entries >= G), E = 1, and K / N that the
 * vector kernels take.
 */
export const SHAPES: readonly MapShape[] = [
  { name: 'repeated experts, an empty group, E < G, a group of 70 rows', sizes: [3, 0, 70, 1, 9], map: [2, 0, 2, 1, 0], E: 3, K: 37, N: 13 },
  { name: 'map entries >= G (E = 5 > G = 2)', sizes: [4, 6], map: [4, 3], E: 5, K: 20, N: 9 },
  { name: 'E = 1, empty groups', sizes: [2, 0, 5, 3, 0], map: [0, 0, 0, 0, 0], E: 1, K: 17, N: 24 },
  // K and N multiples of 4 (the gpu's vec4 kernel takes it), N not of its tile.
  { name: 'K, N multiples of 4, map entries >= G repeated', sizes: [5, 40, 0, 12], map: [5, 1, 0, 5], E: 6, K: 24, N: 20 },
];

/**
 * `f32`: f32 src / weights / dst, per-group src and dst scales, weights scales per expert and column,
 * bias per expert, binary_add [G, N] then binary_mul [G, 1, 1].
 * `f32_epilogue`: the same without src / weights scales (what the vec4 gpu kernel takes: per-group values in
 * the epilogue only).
 * `int`: s8 src x s8 weights -> s32 dst, per-group src zero points and scales, weights scales per
 * expert and column, binary_add [G, 1, N], per-group dst scales and zero points (the integer path).
 * `int_nozp`: `int` without zero points, to f32 (what the gpu's dot4 kernel takes).
 * `int_kblock`: s8 x s8 -> f32 with weights scales varying along K (the cpu's f32 fused path: the
 * src zero point folded while packing), per-group src zero points and scales, per-group dst scales.
 */
export type Quant = 'f32' | 'f32_epilogue' | 'int' | 'int_nozp' | 'int_kblock';
export const QUANTS: readonly Quant[] = ['f32', 'f32_epilogue', 'int', 'int_nozp', 'int_kblock'];
/**
 * P1: grouped src / dst descriptors; P2: plain ones and the grouped-offsets attribute; gather: P1 with
 * src rows gathered from tokens; scatter: P1 with dst rows scattered to token x topK + slot.
 */
export type Rows = 'P1' | 'P2' | 'gather' | 'scatter';
export const ROWS: readonly Rows[] = ['P1', 'P2', 'gather', 'scatter'];

export interface Outcome {
  readonly implInfo: string;
  readonly got: Float64Array;
  readonly want: Float64Array;
}

const plain = (dims: readonly number[], t: DataType): MemoryDesc => memory.desc([...dims], t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc);

/** Rounds half to even and saturates to s32 (values here are integers: a check that they stay so). */
function toS32(x: number): number {
  const r = Math.round(x);
  const even = Math.abs(x - Math.trunc(x)) === 0.5 ? 2 * Math.round(x / 2) : r;
  return Math.max(-2147483648, Math.min(2147483647, even));
}

/**
 * Builds and runs one case on `eng`; dst starts at a sentinel, so rows written by no group would show.
 * Every value is a small multiple of a power of two, so the expectation is exact in f32 whatever the
 * summation order: the implementations must match it bit for bit.
 */
export async function runCase(eng: Engine | GpuEngine, strm: Stream, s: MapShape, q: Quant, rows: Rows): Promise<Outcome> {
  const { sizes, map, E, K, N } = s;
  const G = sizes.length, M = sizes.reduce((a, b) => a + b, 0);
  const offs = [0];
  for (const n of sizes) offs.push(offs[offs.length - 1] + n);
  const groupOf = Int32Array.from({ length: M }, (_, r) => offs.findIndex((o, g) => g < G && r >= o && r < offs[g + 1]));
  const rng = mulberry32(7 + G * 31 + K);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];
  const ints = (n: number, lo: number, hi: number): Float64Array => Float64Array.from({ length: n }, () => lo + Math.floor(rng() * (hi - lo + 1)));
  const isInt = q === 'int' || q === 'int_nozp' || q === 'int_kblock', isF32 = !isInt, epi = q === 'f32_epilogue';
  const srcZps = isInt && q !== 'int_nozp';
  // K blocks of the weights scales (int_kblock): 4 where K allows, else one scale per k.
  const KB = K % 4 === 0 ? 4 : 1;
  const srcDt = isInt ? dt.s8 : dt.f32, weiDt = isInt ? dt.s8 : dt.f32, dstDt = q === 'int' ? dt.s32 : dt.f32;
  // Gather: T tokens, routed row r reads token TI[r] (every token at least once, some twice).
  // Scatter: T tokens x topK slots, routed row r writes token TI[r] (a permutation of the tokens per
  // slot), slot KS[r] = floor(r / T): every (token, slot) pair once.
  const topK = rows === 'scatter' && M % 2 === 0 ? 2 : 1;
  const T = rows === 'gather' ? Math.max(1, Math.ceil(M / 2)) : M / topK;
  const TI = Int32Array.from({ length: M }, (_, r) => (rows === 'gather' ? (r * 7 + 3) % T : rows === 'scatter' ? ((r % T) * 7 + 3) % T : r));
  const KS = Int32Array.from({ length: M }, (_, r) => Math.floor(r / T));
  if (rows === 'scatter') expect(T % 7, 'the token permutation needs T prime to 7').not.toBe(0);
  const srcRows = rows === 'gather' ? T : M;
  const xs = isInt ? ints(srcRows * K, -8, 8) : Float64Array.from({ length: srcRows * K }, () => (Math.floor(rng() * 17) - 8) / 2);
  const ws = isInt ? ints(E * K * N, -8, 8) : Float64Array.from({ length: E * K * N }, () => (Math.floor(rng() * 17) - 8) / 2);
  const srcScale = Float64Array.from({ length: G }, () => pick(isInt ? [1, 2] : [0.25, 0.5, 1, 2]));
  const srcZp = ints(G, -3, 3);
  const weiScale = Float64Array.from({ length: E * (q === 'int_kblock' ? K / KB : 1) * N }, () => pick(q === 'int' || q === 'int_nozp' ? [1, 2, 4] : [0.5, 1, 2]));
  const bias = Float64Array.from({ length: E * N }, () => (Math.floor(rng() * 9) - 4) / 4);
  const add = isInt ? ints(G * N, -20, 20) : Float64Array.from({ length: G * N }, () => (Math.floor(rng() * 9) - 4) / 4);
  const mul = Float64Array.from({ length: G }, () => pick([0.5, 2, -1]));
  const dstScale = Float64Array.from({ length: G }, () => pick(isInt ? [1, 0.5, 0.25] : [0.5, 1, 4]));
  const dstZp = ints(G, -50, 50);

  const attr = new PrimitiveAttr().setExpertMap();
  if (rows === 'P2') attr.setGroupedOffsets(ARG.SRC, G);
  if (rows === 'gather') attr.setGather();
  if (rows === 'scatter') attr.setScatter(topK);
  if (!epi) attr.setScales(ARG.SRC, 0);
  if (srcZps) attr.setZeroPoints(ARG.SRC, 0);
  if (!epi) attr.setScales(ARG.WEIGHTS, q === 'int_kblock' ? 7 : 5, q === 'int_kblock' ? [1, KB, 1] : []);
  attr.setScales(ARG.DST, 0);
  if (q === 'int') attr.setZeroPoints(ARG.DST, 0);
  const addMd = isF32 ? plain([G, N], dt.f32) : plain([G, 1, N], dt.f32);
  if (q !== 'int_kblock') attr.postOps.appendBinary('binary_add', addMd);
  if (isF32) attr.postOps.appendBinary('binary_mul', plain([G, 1, 1], dt.f32));

  const grouped = (cols: number, t: DataType): MemoryDesc => memory.desc.grouped([M, cols], t, G, [RUNTIME_DIM_VAL, cols]);
  const srcMd = rows === 'P1' || rows === 'scatter' ? grouped(K, srcDt) : plain([srcRows, K], srcDt);
  const dstMd = rows === 'P2' || rows === 'scatter' ? plain([M, N], dstDt) : grouped(N, dstDt);
  const weiMd = plain([E, K, N], weiDt), biasMd = isF32 ? plain([E, N], dt.f32) : undefined;
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  // One value per group: [G] (the groups, not the E experts).
  if (!epi) expect(pd.queryMd('scales:src')!.dims).toEqual([G]);
  expect(pd.queryMd('scales:dst')!.dims).toEqual([G]);
  expect(pd.queryMd('expert_map')!.dims).toEqual([G]);

  const mems: (Memory | GpuMemory)[] = [];
  const mk = (md: MemoryDesc, v?: ArrayLike<number>): Memory | GpuMemory => {
    const m = Memory.create(md, eng);
    mems.push(m);
    if (v) m.write(v);
    return m;
  };
  const setOffs = (m: Memory | GpuMemory): void => {
    if ('writeOffsets' in m) m.writeOffsets(offs);
    else m.offsets.set(offs);
  };
  const SENTINEL = 77;
  const prim = new matmul.Primitive(pd);
  try {
    const src = mk(srcMd, xs), dst = mk(dstMd, new Array<number>(M * N).fill(SENTINEL));
    if (rows === 'P1' || rows === 'scatter') setOffs(src);
    if (rows === 'P1' || rows === 'gather') setOffs(dst);
    const args: Record<number, Memory | GpuMemory> = {
      [ARG.SRC]: src, [ARG.WEIGHTS]: mk(weiMd, ws), [ARG.DST]: dst,
      [ARG.MOE_EXPERT_MAP]: mk(plain([G], dt.s32), map),
      [ARG.ATTR_SCALES | ARG.DST]: mk(pd.queryMd('scales:dst')!, dstScale),
    };
    if (!epi) {
      args[ARG.ATTR_SCALES | ARG.SRC] = mk(pd.queryMd('scales:src')!, srcScale);
      args[ARG.ATTR_SCALES | ARG.WEIGHTS] = mk(pd.queryMd('scales:weights')!, weiScale);
    }
    if (rows === 'P2') args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = mk(pd.queryMd('grouped_offsets')!, offs);
    if (rows === 'gather' || rows === 'scatter') args[ARG.MOE_TOKEN_INDEX] = mk(plain([M], dt.s32), TI);
    if (rows === 'scatter') args[ARG.MOE_TOKEN_KS] = mk(plain([M], dt.s32), KS);
    if (srcZps) args[ARG.ATTR_ZERO_POINTS | ARG.SRC] = mk(pd.queryMd('zero_points:src')!, srcZp);
    if (q === 'int') args[ARG.ATTR_ZERO_POINTS | ARG.DST] = mk(pd.queryMd('zero_points:dst')!, dstZp);
    if (biasMd) args[ARG.BIAS] = mk(biasMd, bias);
    if (q !== 'int_kblock') args[ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1] = mk(pd.queryMd('binary:0')!, add);
    if (isF32) args[ARG.ATTR_MULTIPLE_POST_OP(1) | ARG.SRC_1] = mk(pd.queryMd('binary:1')!, mul);
    prim.execute(strm, args);
    await strm.wait();
    const got = Float64Array.from(await dst.read());

    const want = new Float64Array(M * N);
    for (let r = 0; r < M; r++) {
      const g = groupOf[r], e = map[g], t = rows === 'gather' ? TI[r] : r, d = rows === 'scatter' ? TI[r] * topK + KS[r] : r;
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) {
          const a = (xs[t * K + k] - (srcZps ? srcZp[g] : 0)) * (epi ? 1 : srcScale[g]);
          const ws1 = epi ? 1 : q === 'int_kblock' ? weiScale[(e * (K / KB) + Math.floor(k / KB)) * N + n] : weiScale[e * N + n];
          acc += a * ws[(e * K + k) * N + n] * ws1;
        }
        let v = acc + (biasMd ? bias[e * N + n] : 0);
        if (isF32) v = (v + add[g * N + n]) * mul[g];
        if (q === 'int' || q === 'int_nozp') v += add[g * N + n];
        v /= dstScale[g];
        if (q === 'int') v += dstZp[g];
        want[d * N + n] = q === 'int' ? toS32(v) : Math.fround(v);
      }
    }
    return { implInfo: pd.implInfo, got, want };
  } finally {
    prim.destroy();
    mems.forEach((m) => m.free());
  }
}

/** Bit-exact agreement, reporting the first mismatch with its row and column. */
export function expectExact(o: Outcome, N: number, what: string): void {
  for (let i = 0; i < o.want.length; i++) {
    if (o.got[i] !== o.want[i]) {
      expect(o.got[i], `${what} (${o.implInfo}): row ${Math.floor(i / N)}, column ${i % N}`).toBe(o.want[i]);
    }
  }
}
