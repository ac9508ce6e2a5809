import { eltwiseChainWgsl } from '../../kernels/wgsl/wgsl_eltwise.js';
import { GEMV_NO_ROWS, gemvBindings, gemvFusionSupported, gemvGeometry, gemvKPerThread, type GemvSplitKConfig } from '../../kernels/wgsl/gemm_splitk_gemv.js';
import { INLINE_MAX_GROUPS, INLINE_MAX_ROWS, scheduleTileBound, type InlineScheduleConfig } from '../../kernels/wgsl/grouped_schedule.js';
import { FUSION_BINDING } from '../../kernels/wgsl/wgsl_quant.js';
import { vec4Eligible, vec4Tuning } from '../../kernels/wgsl/gemm_tiled_vec4.js';
import { chunkWidth } from '../../kernels/wgsl/gemm_tiled_staging.js';
import { dot4Eligible } from '../../kernels/wgsl/gemm_tiled_dot4.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import { mapWords, type GemmFusion } from '../../kernels/wgsl/wgsl_quant.js';
import type { WeiKBlocks } from '../../kernels/wgsl/gemm_fusion.js';
import type { MatmulProblem } from './problem.js';
import { gemmFusionOf, needsFusion, type FusionSubject } from './webgpu_fusion.js';
import type { MemoryDesc } from '../../memory/desc.js';

/**
 * Which WGSL GEMM runs a gpu matmul, from what the host knows (shapes, strides, types, the row
 * capacity; never the runtime group sizes):
 *  - `gemv-splitk` (gemm_splitk_gemv.ts) for grouped M with few rows per group on average (decode),
 *    float or 8-bit integer src, every fusion, the MoE gather / scatter / expert map / zero fill;
 *  - `gemm-tiled-vec4` (gemm_tiled_vec4.ts) for f32 prefill with vector-aligned strides, row modes
 *    and epilogue fusions (GLU, binary) included;
 *  - `gemm-tiled-dot4` (gemm_tiled_dot4.ts) for W8A8 (s8 x s8, u8 x u8, no zero points) where WGSL
 *    has `packed_4x8_integer_dot_product`, row modes (gather, scatter, expert map, zero fill, batched
 *    counts) and binding windows included;
 *  - `gemm-tiled` (gemm_tiled.ts) for everything else.
 */

/**
 * Benchmark-only switches (bench/gpu_bench.ts compares kernels in one process); not part of the
 * public API. Read when a primitive is created.
 */
export const gpuKernelTuning: {
  gemv: boolean; vec4: boolean; dot4: boolean; gemvMaxRows: number; kPerThread: number | undefined; tiledTn: number | undefined; tiledBk: number | undefined; chunk: boolean;
  staticKBlocks: boolean; dot4Bk: number | undefined;
  /** gemv-splitk finds its tiles itself (no grouped-schedule dispatch) where G and M allow. */
  gemvInline: boolean;
  /** gemv-splitk's K splits: undefined = the planner's choice (gemvKSplitFor). */
  gemvKSplit: number | undefined;
  /**
   * Workgroups (column tiles x K splits x schedule tiles) gemvKSplitFor aims at with 4-bit weights: on
   * an H200 their decode GEMMs ran fastest with grids of a few hundred workgroups (reports/decode3-h200.md:
   * ~5 splits at T = 1, none from T = 4; each split past that adds idle workgroups and a reduce pass).
   * Infinity: the splits that leave each thread gemvKPerThread K iterations (the previous choice).
   */
  gemvTargetWorkgroups: number;
  /**
   * Workgroups (column tiles x schedule tiles) below which gemv-splitk splits K across workgroups (as
   * many splits as bring the grid to it, never past the K iterations per thread); undefined: the
   * previous rule (gemvTargetWorkgroups for 4-bit weights, gemvKPerThread for the others). On an H200
   * (reports/gemv5-h200.md) every K split measured slower at MoE-B decode, whose grids are >= 176 workgroups
   * with the geometry below: the reduce pass costs ~10 us and the split threads stream less each.
   */
  gemvMinWorkgroups: number | undefined;
  /**
   * gemv-splitk's lanes per workgroup (S = 256 / lanes K slices in it): more slices fill the GPU
   * without a K split's reduce pass. Undefined: gemvDecodeLanes.
   */
  gemvLanes: number | undefined;
  /**
   * gemv-splitk's weight loads in flight per thread (4, 8, 16): 8 (the previous 4 streamed int4 at
   * T = 4 ~25% slower on an H200; 16 measured within 2% of 8).
   */
  gemvUnroll: number;
  /**
   * gemv-splitk applies K-blocked weight scales to each block's partial sums (GemvSplitKConfig.blockScale):
   * off, since it measured slower on an H200 with one row per tile (int4 T = 8: 145 vs 100 us).
   */
  gemvBlockScale: boolean;
  /**
   * gemv-splitk's rows per tile, undefined: 1 where the rows are at most the groups (M <= G: decode,
   * most experts hold one row, so wider tiles only repeat their row's arithmetic), else 4 up to 4 rows
   * per group on average, else 8.
   */
  gemvRows: number | undefined;
  /**
   * gemv-splitk's K per slice rounded up to the weights' scale K block (whole blocks per slice) and to the unroll.
   * Off by default: no gain measured at MoE-B. (Session 10 saw test/gpu_quant's E = 1 case hang with it on; that
   * case's kernel and K per slice are the same either way: the hang was the next case's fp8 pipeline, see below.)
   */
  gemvAlignK: boolean;
  /** Workgroups below which 4-bit weights take 8 lanes instead of 16 (gemvLanesFor); 0: never. */
  gemvSmallGrid: number;
  /**
   * K splits at most of a dense gemv (denseGemvPlan): 1, since on an H200 ([T, 2048] x [2048, 2816], T = 1..8,
   * bench/gpu_dense_decode.ts, reports/gpu-dense-decode-h200-s16.txt) the split's reduce pass cost more
   * wall time than its shorter K loops saved (u4 T = 1: 0.112 vs 0.224 ms; GPU 17.5 vs 21.3 us).
   */
  gemvDenseMaxKSplit: number;
  /**
   * The most rows a dense gemv takes (denseGemvPlan, and a P#3 expert's row capacity: expertGemvPlan);
   * above 8 rows it runs tiles of 8 rows, each reading the weights again. 64: on an H200 ([T, 2048] x
   * [2048, 2816], reports/gpu-dense-rows-h200-s16.txt) the gemv's GPU time beat gemm-tiled's up to T = 64
   * for f32, u4 and s8 (84 / 79 / 62 us vs 254 / 110 / 101 us); at T = 128 u4 and s8 were even.
   */
  gemvDenseMaxRows: number;
  /**
   * P#3 `:dq` (webgpu:dynamic-quant): where every expert with rows runs the dense gemv, the gemv quantizes its
   * own rows (gemm_splitk_gemv.ts quantSrc), same bits, no quantization pass per expert; false: the passes.
   */
  gemvQuantSrc: boolean;
  /**
   * With gemvQuantSrc: the workgroup quantizes its rows' codes once into workgroup memory where they fit
   * (gemm_splitk_gemv.ts gemvQuantStageWords), the same codes as each lane requantizing those it reads (false).
   */
  gemvQuantStage: boolean;
} = {
  gemv: true, vec4: true, dot4: true, gemvMaxRows: 8, kPerThread: undefined, tiledTn: undefined, tiledBk: undefined, chunk: true, staticKBlocks: true,
  dot4Bk: undefined, gemvInline: true, gemvKSplit: undefined, gemvTargetWorkgroups: 512,
  // Session 10's measured decode geometry (reports/gemv5-h200.md): K splits only below 128 workgroups, lanes
  // by type, 8 loads in flight, one row per tile where M <= G. (Its SwiftShader hang was the fp8 E4M3
  // decoder's branch inlined 52 times at unroll 8: wgsl_dtypes.ts WGSL_LOWP_HELPERS, now branch-free.)
  gemvMinWorkgroups: 128, gemvLanes: undefined, gemvUnroll: 8, gemvBlockScale: false, gemvRows: undefined, gemvAlignK: false,
  gemvSmallGrid: 256, gemvDenseMaxKSplit: 1, gemvDenseMaxRows: 64, gemvQuantSrc: true, gemvQuantStage: true,
};

/** The tuning of gemv-splitk before session 10 (bench/gpu_decode_probe.ts `old`: the previous kernel in-process). */
export const GEMV_PREVIOUS_TUNING: Partial<typeof gpuKernelTuning> = {
  gemvInline: true, gemvKSplit: undefined, gemvTargetWorkgroups: 512, gemvMinWorkgroups: undefined, gemvLanes: 0, gemvUnroll: 4,
  gemvBlockScale: false, gemvRows: 0, gemvAlignK: false, gemvSmallGrid: 0,
};

/**
 * Lanes per workgroup of gemv-splitk by weights type (gpuKernelTuning.gemvLanes unset; 0: the type's
 * previous default, gemvGeometry): 8 for f32 (32 K slices per workgroup), 16 for 8-bit and 4-bit
 * weights. Measured on an H200 at MoE-B decode, one row per tile (reports/gemv5-h200.md): f32 T = 1
 * 51 us with 8 lanes vs 56 with 16; s8 T = 4 69 us with 16 vs 108 with 8 and 91 with 32.
 */
export function gemvDecodeLanes(wei: MatmulProblem['weights']['dataType']): number | undefined {
  const t = gpuKernelTuning.gemvLanes;
  if (t === 0) return undefined;
  return t ?? (wei === 'f32' ? 8 : 16);
}

/**
 * gemv-splitk's lanes for `wei` over `tiles` schedule tiles (colTilesOf(L, C): column tiles of a geometry):
 * gemvDecodeLanes, except 4-bit weights, whose 16 lanes give way to 8 (twice the workgroups, half the K
 * per thread) where 16 would launch fewer than gpuKernelTuning.gemvSmallGrid workgroups: there the grid
 * would otherwise fall below gemvMinWorkgroups and take a K split with its ~10 us reduce pass, or leave
 * SMs idle. On an H200 (reports/gemv-grid-h200-s12.md, MoE-B decode, int4): at T = 1 the layer's GEMMs
 * took 25.5 + 25.2 us with 8 lanes against 28.0 + 23.2 + a 10.8 us reduce with 16; at T = 4 (grids of
 * 528 and 384 with 16 lanes) 16 lanes are faster (58.5 + 44.4 us against 62.3 + 56.0).
 */
export function gemvLanesFor(wei: MatmulProblem['weights']['dataType'], tiles: number, colTilesOf: (L: number, C: number) => number): number | undefined {
  const lanes = gemvDecodeLanes(wei);
  if (gpuKernelTuning.gemvLanes !== undefined || lanes !== 16) return lanes;
  const { C } = gemvGeometry(wei, lanes);
  return C === 8 && colTilesOf(16, C) * tiles < gpuKernelTuning.gemvSmallGrid ? 8 : lanes;
}

/**
 * K blocks of the weights' K-blocked scales / zero points that `gemm-tiled` can hold in registers in
 * every K slice, known at creation (gemm_fusion.ts WeiKBlocks): blocks that are multiples of the
 * slice `bk`, K ranges starting at 0 (not grouped K, whose ranges come from the offsets), f32 staging
 * (an integer GEMM has no K-blocked scales). Undefined: none (the kernel decides per workgroup).
 */
export function weiKBlocksOf(p: Pick<MatmulProblem, 'fusion'> & { readonly kind?: MatmulProblem['kind'] }, bk: number): WeiKBlocks | undefined {
  if (!gpuKernelTuning.staticKBlocks || p.kind === 'grouped_k') return undefined;
  const out: { wsc?: number; wzp?: number } = {};
  for (const [b, q] of [['wsc', p.fusion.scales.weights], ['wzp', p.fusion.zeroPoints.weights]] as const) {
    if (!q) continue;
    // Padded map words (wgsl_quant.ts): dim 1 is K; its stride 0 means no K term, block 1 one value per k.
    const w = mapWords(q.map);
    if (w[2] !== 0 && w[5] > 1 && w[5] % bk === 0) out[b] = w[5];
  }
  return out.wsc || out.wzp ? out : undefined;
}

/**
 * Consecutive weights columns `gemm-tiled` stages per load (gemm_tiled_staging.ts), 0 for one element
 * per load: f32 (vec4) and s8 / u8 / s4 / u4 (a word) weights with unit column stride whose chunks
 * never straddle a row, a group, a binding window (aligned to 256 bytes: whole chunks) or a GLU half.
 */
export function bChunkOf(p: MatmulProblem): number {
  const V = chunkWidth(p.weights.dataType);
  if (!gpuKernelTuning.chunk || V === 0) return 0;
  const w = p.weights.strides, nd = p.weights.ndims;
  const ldwn = w[nd - 1], ldwk = w[nd - 2];
  // The weights stride per group / batch (absent: one weights matrix).
  const wg = nd === 3 && p.weights.dims[0] !== 1 ? w[0] : 0;
  if (ldwn !== 1 || ldwk % V !== 0 || wg % V !== 0 || p.N % V !== 0) return 0;
  const glu = p.fusion.glu;
  if (glu && (glu.layout === 'interleaved' || (glu.layout === 'halves' && (p.N / 2) % V !== 0))) return 0;
  return V;
}

/** Whether the W8A8 GEMM of `p` runs `gemm-tiled-dot4` on `eng` (undefined engine: no). */
export function dot4Kernel(p: MatmulProblem, eng: GpuEngine | undefined): boolean {
  if (!gpuKernelTuning.dot4 || !eng?.caps.packedDot4 || !needsFusion(p)) return false;
  return dot4Eligible({ src: p.src.dataType, wei: p.weights.dataType }, gemmFusionOf(p));
}

export interface GemvPlan {
  readonly cfg: GemvSplitKConfig;
  readonly colTiles: number;
  readonly kChunk: number;
}

/**
 * K splits of gemv-splitk: the splits that leave each thread gemvKPerThread K iterations (at least 1,
 * at most 16); for 4-bit weights (8 columns per thread) no more than keep the grid within
 * gemvTargetWorkgroups. On an H200 (reports/decode3-h200.md) fewer splits made int4 faster from T = 4
 * (one split: 0.228 vs 0.264 ms at T = 8) but 8-bit weights slower (s8 T = 8: 0.291 vs 0.224 ms), and
 * f32 takes one split at these K anyway.
 */
export function gemvKSplitFor(K: number, S: number, colTiles: number, tiles: number, wei: MatmulProblem['weights']['dataType']): number {
  const most = Math.max(1, Math.min(16, Math.ceil(K / (S * gemvKPerThread(wei)))));
  const grid = Math.max(1, colTiles * tiles);
  const min = gpuKernelTuning.gemvMinWorkgroups;
  if (min !== undefined) return Math.max(1, Math.min(most, Math.ceil(min / grid)));
  if (gemvGeometry(wei).C !== 8) return most;
  return Math.max(1, Math.min(most, Math.floor(gpuKernelTuning.gemvTargetWorkgroups / grid)));
}

/** Bytes of scratch for partial sums the split may use at most (beyond it, fewer splits). */
const MAX_PARTIALS_BYTES = 64 << 20;

/**
 * What gemv-splitk reads of a GEMM besides its rows: a matmul problem, or one expert of a Proposal #3
 * grouped_gemm (its own descriptors and fusion, the primitive's attr; no bias).
 */
export type GemvSubject = FusionSubject & Pick<MatmulProblem, 'K' | 'N'> & { readonly bias?: MemoryDesc | undefined; readonly kind?: MatmulProblem['kind'] };

/** How the rows of a gemv-splitk GEMM are found: rows per tile, the tiles a grid covers, the row capacity (partial sums). */
interface GemvRowsPlan {
  readonly rows: number;
  readonly tiles: number;
  readonly capacity: number;
  readonly moe: GemvSplitKConfig['moe'];
  /** The in-kernel schedule for this tile height (grouped), undefined: none. */
  readonly inline: InlineScheduleConfig | undefined;
  /** One dense GEMM (GemvSplitKConfig.dense). */
  readonly dense: boolean;
  /** At most this many K splits (1: no reduce pass, no partial sums). */
  readonly maxKSplit: number;
}

/**
 * The decode kernel's plan for `p` on `eng`, undefined where it does not apply. MoE row modes: gather,
 * scatter, expert map and zero-filled ungrouped rows run here; batched token counts (3D dense with
 * per-batch counts, another schedule) stay on gemm-tiled. A dense 2D matmul of few rows runs here too
 * (denseGemvPlan).
 */
export function gemvPlan(p: MatmulProblem, eng: GpuEngine): GemvPlan | undefined {
  if (p.kind === 'dense') return denseGemvPlan(p, eng);
  if (!gpuKernelTuning.gemv || p.kind !== 'grouped_m' || p.offsetsFrom === undefined) return undefined;
  // The offsets live in src, or (gather: src is the plain tokens) in dst.
  if (p.offsetsArg !== 'src' && !p.moe.gather) return undefined;
  // It binds whole buffers: tensors beyond one storage binding take gemm-tiled's windows.
  const max = eng.caps.maxStorageBufferBindingSize;
  if ([p.src, p.weights, p.dst].some((md) => md.getSize(0) > max)) return undefined;
  if (p.moe.batchedCounts || p.G < 1) return undefined;
  const meanRows = p.M / p.G;
  if (meanRows > gpuKernelTuning.gemvMaxRows) return undefined;
  const tr = gpuKernelTuning.gemvRows;
  const rows = tr || (tr === undefined && p.M <= p.G ? 1 : meanRows <= 4 ? 4 : 8);
  return gemvPlanOf(p, eng, {
    rows, tiles: scheduleTileBound(p.M, p.G + (p.moe.zeroFill ? 2 : 0), rows), capacity: p.M,
    moe: { gather: p.moe.gather, scatter: p.moe.scatterTopK > 0, zeroFill: p.moe.zeroFill }, inline: inlineScheduleOf(p, rows), dense: false, maxKSplit: 16,
  });
}

/** Rows per tile of a dense gemv over `rows` rows: the next power of two up to 8 (one tile holds them all), else 8. */
function denseTileRows(rows: number): number {
  let r = 1;
  while (r < Math.min(rows, 8)) r *= 2;
  return r;
}

/**
 * gemv-splitk for a dense 2D matmul of at most gemvDenseMaxRows rows (one tile of all of them up to 8: each weight
 * is read once), undefined where it does not apply: a bias that changes along M (the kernel's bias
 * has no row term), tensors past one storage binding.
 */
export function denseGemvPlan(p: MatmulProblem, eng: GpuEngine): GemvPlan | undefined {
  if (!gpuKernelTuning.gemv || p.kind !== 'dense' || p.batch.length > 0 || p.moe.batchedCounts) return undefined;
  if (p.M < 1 || p.M > gpuKernelTuning.gemvDenseMaxRows) return undefined;
  if (p.bias && p.bias.dims[0] !== 1 && p.M > 1) return undefined;
  const max = eng.caps.maxStorageBufferBindingSize;
  if ([p.src, p.weights, p.dst].some((md) => md.getSize(0) > max)) return undefined;
  const rows = denseTileRows(p.M);
  return gemvPlanOf(p, eng, { rows, tiles: Math.ceil(p.M / rows), capacity: p.M, moe: GEMV_NO_ROWS, inline: undefined, dense: true, maxKSplit: gpuKernelTuning.gemvDenseMaxKSplit });
}

/**
 * gemv-splitk for one expert of a Proposal #3 grouped_gemm whose src / dst hold at most gemvDenseMaxRows
 * rows (`capacity`; M_i comes on the device): one tile of them all, no K split (each expert is a
 * dispatch of its own; a reduce pass would double them). Undefined where it does not apply.
 */
export function expertGemvPlan(e: GemvSubject, capacity: number, eng: GpuEngine): GemvPlan | undefined {
  if (!gpuKernelTuning.gemv || capacity < 1 || capacity > gpuKernelTuning.gemvDenseMaxRows) return undefined;
  const rows = denseTileRows(capacity);
  return gemvPlanOf(e, eng, { rows, tiles: Math.ceil(capacity / rows), capacity, moe: GEMV_NO_ROWS, inline: undefined, dense: true, maxKSplit: 1 });
}

/** The plan of a subject whose rows are planned (`r`): types, fusion, lanes, K splits, vector loads. */
function gemvPlanOf(s: GemvSubject, eng: GpuEngine, r: GemvRowsPlan): GemvPlan | undefined {
  // Float src, or s8 / u8 (W8A8: the integer GEMM, or codes dequantized in the loop).
  if (!['f32', 'f16', 'bf16', 's8', 'u8'].includes(s.src.dataType) || s.N < 1) return undefined;
  let fusion: GemmFusion | undefined;
  if (needsFusion(s)) {
    fusion = gemmFusionOf(s);
    if (!gemvFusionSupported(fusion)) return undefined;
  }
  const chain = fusion ? '' : eltwiseChainWgsl(s.attr.postOps.entries);
  if (chain === undefined) return undefined;
  // A GLU column tile holds the gate and up columns of half as many dst columns.
  const colTilesOf = (L: number, C: number): number => Math.ceil(s.dstN / (fusion?.glu ? (L * C) / 2 : L * C));
  const lanes = gemvLanesFor(s.weights.dataType, r.tiles, colTilesOf);
  const { C, L, S } = gemvGeometry(s.weights.dataType, lanes);
  // Weights strides: group (0 for one matrix), K, N.
  const w = s.weights.strides;
  const [wg, ldwk, ldwn] = s.weights.ndims === 3 ? w : [0, w[0], w[1]];
  // GLU halves: the up columns start N / 2 after the gate ones, aligned for vector loads only when C divides it.
  const halves = fusion?.glu?.layout === 'halves';
  const vec = ldwn === 1 && ldwk % C === 0 && wg % C === 0 && (!halves || (s.N / 2) % C === 0);
  const colTiles = colTilesOf(L, C);
  const kSplit0 = gpuKernelTuning.gemvKSplit ?? (gpuKernelTuning.kPerThread !== undefined
    ? Math.max(1, Math.min(16, Math.ceil(s.K / (S * gpuKernelTuning.kPerThread))))
    : gemvKSplitFor(s.K, S, colTiles, r.tiles, s.weights.dataType));
  let kSplit = Math.min(r.maxKSplit, kSplit0);
  while (kSplit > 1 && kSplit * r.capacity * s.N * 4 > MAX_PARTIALS_BYTES) kSplit--;
  if (colTiles * kSplit > 65535) return undefined;
  const unroll = gpuKernelTuning.gemvUnroll;
  const kChunk = alignedKChunk(Math.ceil(s.K / (kSplit * S)), s, unroll);
  const base: GemvSplitKConfig = {
    rows: r.rows, src: s.src.dataType, wei: s.weights.dataType, dst: s.dst.dataType, bias: s.bias?.dataType, vec, kSplit, epilogue: chain, fusion, moe: r.moe,
    lanes, unroll, blockScale: gpuKernelTuning.gemvBlockScale, ...(r.dense ? { dense: true } : {}),
  };
  const cfg = r.inline && fitsStorage({ ...base, inline: r.inline }, eng) ? { ...base, inline: r.inline } : base;
  // A dense plan must fit the storage limit here (a grouped one falls back to the schedule dispatch above).
  if (r.dense && !fitsStorage(cfg, eng)) return undefined;
  return { cfg, colTiles, kChunk };
}

/**
 * K per slice (gpuKernelTuning.gemvAlignK): whole K blocks of the weights' scales / zero points where
 * a slice holds one or more (a slice starting inside a block runs its head one load at a time), else a
 * multiple of the unroll. The last slices may get less K, or none.
 */
function alignedKChunk(kChunk: number, p: GemvSubject, unroll: number): number {
  if (!gpuKernelTuning.gemvAlignK) return kChunk;
  const kb = weiKBlocksOf(p, 1);
  const block = Math.max(kb?.wsc ?? 0, kb?.wzp ?? 0);
  const a = block > 0 && block <= kChunk && block % 4 === 0 ? block : Math.min(unroll, kChunk);
  return Math.ceil(kChunk / a) * a;
}

/**
 * The in-kernel schedule of `p` (decode sizes: at most INLINE_MAX_GROUPS groups and INLINE_MAX_ROWS
 * rows, so each workgroup's validation and tile search is one chunk), undefined: the
 * grouped-schedule dispatch.
 */
function inlineScheduleOf(p: MatmulProblem, tm: number): InlineScheduleConfig | undefined {
  if (!gpuKernelTuning.gemvInline || p.G > INLINE_MAX_GROUPS || p.M > INLINE_MAX_ROWS) return undefined;
  const sizes = (p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes) !== undefined;
  // A grouped dst beside a grouped src may hold offsets of its own (webgpu_matmul.ts deviceGrouping).
  const other = p.offsetsFrom === 'desc' && p.offsetsArg === 'src' && !p.moe.gather && p.dst.isGrouped;
  return { expertMap: p.moe.expertMap, rows: p.moe.gather ? 'gather' : p.moe.scatterTopK ? 'scatter' : 'none', other, sizes, tm };
}

/** Whether both passes of `c` bind at most the device's storage buffers per stage. */
function fitsStorage(c: GemvSplitKConfig, eng: GpuEngine): boolean {
  const limit = eng.device.limits.maxStorageBuffersPerShaderStage;
  const storage = (pass: 'main' | 'reduce'): number => gemvBindings(c, pass).filter((b) => b !== 0 && b !== FUSION_BINDING).length;
  return storage('main') <= limit && (c.kSplit === 1 || storage('reduce') <= limit);
}

/**
 * M tile of `gemm-tiled-vec4` for `p`, undefined where it does not apply. Every MoE row mode (gather,
 * scatter, zero fill, expert map, batched counts) and the epilogue fusions (GLU, binary, sum, dst
 * scales: vec4FusionOk) run there; binding windows stay on gemm-tiled (the executor's choice).
 */
export function vec4Tile(p: MatmulProblem): number | undefined {
  if (!gpuKernelTuning.vec4 || p.kind === 'grouped_k') return undefined;
  const fusion = needsFusion(p) ? gemmFusionOf(p) : undefined;
  if (!fusion && eltwiseChainWgsl(p.attr.postOps.entries) === undefined) return undefined;
  if (p.kind === 'dense' && p.batch.length > 1) return undefined;
  const s = p.src.strides, w = p.weights.strides, nd = p.weights.ndims;
  const batched = p.kind === 'grouped_m' || nd === 3;
  const strides = {
    K: p.K, N: p.N, lda: s[s.length - 2], ldwk: w[nd - 2], ldwn: w[nd - 1],
    wg: batched && p.weights.dims[0] !== 1 ? w[0] : 0,
    sb: p.kind === 'dense' && p.src.ndims === 3 && p.src.dims[0] !== 1 ? s[0] : 0,
  };
  if (!vec4Eligible({ mode: p.kind, src: p.src.dataType, wei: p.weights.dataType, fusion }, strides)) return undefined;
  const rows = p.kind === 'grouped_m' ? p.M / Math.max(1, p.G) : p.M;
  // The big tile (vec4Tuning): 64 rows for grouped rows in place (P#1), 128 with a gather / scatter or dense.
  const big = vec4Tuning.bigTile ?? (p.kind === 'grouped_m' && !p.moe.gather && !p.moe.scatterTopK ? 64 : 128);
  return rows <= 32 ? 32 : rows <= 64 ? 64 : big;
}
