import { eltwiseChainWgsl } from '../../kernels/wgsl/wgsl_eltwise.js';
import { gemvFusionSupported, gemvGeometry, gemvKPerThread, type GemvSplitKConfig } from '../../kernels/wgsl/gemm_splitk_gemv.js';
import { vec4Eligible, vec4Tuning } from '../../kernels/wgsl/gemm_tiled_vec4.js';
import { chunkWidth } from '../../kernels/wgsl/gemm_tiled_staging.js';
import { dot4Eligible } from '../../kernels/wgsl/gemm_tiled_dot4.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { GemmFusion } from '../../kernels/wgsl/wgsl_quant.js';
import type { MatmulProblem } from './problem.js';
import { gemmFusionOf, needsFusion } from './webgpu_fusion.js';

/**
 * Which WGSL GEMM runs a gpu matmul, from what the host knows (shapes, strides, types, the row
 * capacity; never the runtime group sizes):
 *  - `gemv-splitk` (gemm_splitk_gemv.ts) for grouped M with few rows per group on average (decode),
 *    float or 8-bit integer src, every fusion, the MoE gather / scatter / expert map / zero fill;
 *  - `gemm-tiled-vec4` (gemm_tiled_vec4.ts) for f32 prefill with vector-aligned strides;
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
} = {
  gemv: true, vec4: true, dot4: true, gemvMaxRows: 8, kPerThread: undefined, tiledTn: undefined, tiledBk: undefined, chunk: true,
};

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

/** Bytes of scratch for partial sums the split may use at most (beyond it, fewer splits). */
const MAX_PARTIALS_BYTES = 64 << 20;

/**
 * The decode kernel's plan for `p` on `eng`, undefined where it does not apply. MoE row modes: gather,
 * scatter, expert map and zero-filled ungrouped rows run here; batched token counts (3D dense with
 * per-batch counts, another schedule) stay on gemm-tiled.
 */
export function gemvPlan(p: MatmulProblem, eng: GpuEngine): GemvPlan | undefined {
  if (!gpuKernelTuning.gemv || p.kind !== 'grouped_m' || p.offsetsFrom === undefined) return undefined;
  // The offsets live in src, or (gather: src is the plain tokens) in dst.
  if (p.offsetsArg !== 'src' && !p.moe.gather) return undefined;
  // It binds whole buffers: tensors beyond one storage binding take gemm-tiled's windows.
  const max = eng.caps.maxStorageBufferBindingSize;
  if ([p.src, p.weights, p.dst].some((md) => md.getSize(0) > max)) return undefined;
  if (p.moe.batchedCounts) return undefined;
  // Float src, or s8 / u8 (W8A8: the integer GEMM, or codes dequantized in the loop).
  if (!['f32', 'f16', 'bf16', 's8', 'u8'].includes(p.src.dataType) || p.G < 1 || p.N < 1) return undefined;
  const meanRows = p.M / p.G;
  if (meanRows > gpuKernelTuning.gemvMaxRows) return undefined;
  let fusion: GemmFusion | undefined;
  if (needsFusion(p)) {
    fusion = gemmFusionOf(p);
    if (!gemvFusionSupported(fusion)) return undefined;
  }
  const chain = fusion ? '' : eltwiseChainWgsl(p.attr.postOps.entries);
  if (chain === undefined) return undefined;
  const { C, L, S } = gemvGeometry(p.weights.dataType);
  const w = p.weights.strides;
  // GLU halves: the up columns start N / 2 after the gate ones, aligned for vector loads only when C divides it.
  const halves = fusion?.glu?.layout === 'halves';
  const vec = w[2] === 1 && w[1] % C === 0 && w[0] % C === 0 && (!halves || (p.N / 2) % C === 0);
  const rows = meanRows <= 4 ? 4 : 8;
  // A GLU column tile holds the gate and up columns of half as many dst columns.
  const colTiles = Math.ceil(p.dstN / (fusion?.glu ? (L * C) / 2 : L * C));
  const perThread = gpuKernelTuning.kPerThread ?? gemvKPerThread(p.weights.dataType);
  let kSplit = Math.max(1, Math.min(16, Math.ceil(p.K / (S * perThread))));
  while (kSplit > 1 && kSplit * p.M * p.N * 4 > MAX_PARTIALS_BYTES) kSplit--;
  if (colTiles * kSplit > 65535) return undefined;
  const kChunk = Math.ceil(p.K / (kSplit * S));
  const moe = { gather: p.moe.gather, scatter: p.moe.scatterTopK > 0, zeroFill: p.moe.zeroFill };
  const cfg: GemvSplitKConfig = {
    rows, src: p.src.dataType, wei: p.weights.dataType, dst: p.dst.dataType, bias: p.bias?.dataType, vec, kSplit, epilogue: chain, fusion, moe,
  };
  return { cfg, colTiles, kChunk };
}

/** M tile of `gemm-tiled-vec4` for `p`, undefined where it does not apply. */
export function vec4Tile(p: MatmulProblem): number | undefined {
  if (!gpuKernelTuning.vec4 || p.kind === 'grouped_k') return undefined;
  if (p.moe.gather || p.moe.scatterTopK || p.moe.zeroFill || p.moe.expertMap || p.moe.batchedCounts) return undefined;
  if (needsFusion(p) || eltwiseChainWgsl(p.attr.postOps.entries) === undefined) return undefined;
  if (p.kind === 'dense' && p.batch.length > 1) return undefined;
  const s = p.src.strides, w = p.weights.strides, nd = p.weights.ndims;
  const batched = p.kind === 'grouped_m' || nd === 3;
  const strides = {
    K: p.K, N: p.N, lda: s[s.length - 2], ldwk: w[nd - 2], ldwn: w[nd - 1],
    wg: batched && p.weights.dims[0] !== 1 ? w[0] : 0,
    sb: p.kind === 'dense' && p.src.ndims === 3 && p.src.dims[0] !== 1 ? s[0] : 0,
  };
  if (!vec4Eligible({ mode: p.kind, src: p.src.dataType, wei: p.weights.dataType, fusion: undefined }, strides)) return undefined;
  const rows = p.kind === 'grouped_m' ? p.M / Math.max(1, p.G) : p.M;
  return rows <= 32 ? 32 : rows <= 64 ? 64 : vec4Tuning.bigTile;
}
