import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine, PassRecorder } from '../../runtime/gpu/gpu_engine.js';
import type { StatusSlot } from '../../runtime/gpu/status_slots.js';
import type { StreamTask } from '../../runtime/stream.js';
import { gemmTiledKey, gemmTiledWgsl, type GemmTiledConfig } from '../../kernels/wgsl/gemm_tiled.js';
import { stagingKey } from '../../kernels/wgsl/gemm_tiled_staging.js';
import {
  groupedScheduleKey, groupedScheduleWgsl, scheduleGrid, scheduleTileBound, scheduleWords, SCHED_HEADER_WORDS, SCHED_PARAMS_BYTES, type ScheduleConfig,
} from '../../kernels/wgsl/grouped_schedule.js';
import { WGSL_ELTWISE_HELPERS, eltwiseChainWgsl } from '../../kernels/wgsl/wgsl_eltwise.js';
import type { GpuMatmulImpl, MatmulArgs, MatmulExecutor } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { offsetsError, type Grouping } from './runtime_offsets.js';
import { ARG, argName } from '../args.js';
import { fusionEntries, fusionRejectReason, fusionUniform, gemmFusionOf, launchFusionUniform, needsFusion, withLaunchOffsets } from './webgpu_fusion.js';
import { splitBatch, type BatchOffsets } from './batch_dims.js';
import { gemmTiledVec4Key, gemmTiledVec4Wgsl, VEC4_TN } from '../../kernels/wgsl/gemm_tiled_vec4.js';
import { bChunkOf, dot4Kernel, gemvPlan, gpuKernelTuning, vec4Tile, weiKBlocksOf } from './webgpu_kernel_choice.js';
import { gemmTiledDot4Key, gemmTiledDot4Wgsl } from '../../kernels/wgsl/gemm_tiled_dot4.js';
import { gemvImplName, WebgpuGemvExecutor } from './webgpu_gemv.js';
import { fusionStorageCount, type GemmFusion } from '../../kernels/wgsl/wgsl_quant.js';
import { GEMM_ROWS_PARAMS_WORDS, TOKEN_INDEX_BINDING, TOKEN_KS_BINDING, type GemmRows } from '../../kernels/wgsl/gemm_rows.js';
import { ROW_ERR, rowMapsError } from './row_maps.js';
import { planWindows, rangeBinding, type BindingWindow } from './binding_windows.js';

/** Tile shape from the mean rows per group (the host knows the capacity, never the runtime sizes). */
function tileOf(p: MatmulProblem, eng?: GpuEngine): { tm: number; tn: number; bk: number } {
  const v = vec4Tile(p);
  // The K slice gemm-tiled takes when binding windows rule the vec4 kernel out (it uses
  // its own): 16, 8 for 128 x 128 tiles (16 KiB of workgroup memory).
  if (v !== undefined) return { tm: v, tn: VEC4_TN, bk: v === 128 ? 8 : 16 };
  const rows = p.kind === 'grouped_m' ? p.M / Math.max(1, p.G) : p.M;
  // 64 columns (4 per thread): more workgroups in flight, which the dequantizing staging needs (an
  // H200 ran MoE-B's int4 GEMMs 11-15% and f32 ones 1-9% faster than with 128 at T = 256, one element
  // per load); 4-bit weights staged in words (gemm_tiled_staging.ts) and dot4 (cheap staging) are
  // faster with 128 where N is wide (int4 gemm1 / gemm2 1333 / 647 us vs 1415 / 710 us on an H200,
  // reports/prefill2-h200.md; measured with 32-row tiles only, so 64-row ones keep 64 columns).
  const dot4 = p.N >= 512 && eng !== undefined && dot4Kernel(p, eng);
  const tn = gpuKernelTuning.tiledTn ?? (dot4 ? 128 : 64);
  const tn32 = gpuKernelTuning.tiledTn ?? (dot4 || (p.N >= 512 && bChunkOf(p) === 8) ? 128 : 64);
  const fit = (tm: number, t: number): { tm: number; tn: number; bk: number } => {
    // Workgroup memory: BK x (TM + 4) A words and BK x TN B words within 16 KiB (the default limit).
    let bk = gpuKernelTuning.tiledBk ?? 16;
    while (bk > 8 && bk * (tm + 4 + t) > 4096) bk /= 2;
    return { tm, tn: t, bk };
  };
  const t = rows <= 16 ? fit(16, 64) : rows <= 32 ? fit(32, tn32) : rows <= 256 || p.N < 512 ? fit(64, tn) : { tm: 128, tn: 128, bk: 8 };
  // dot4 stages four k per word, so a K slice takes a quarter of gemm-tiled's workgroup memory per k and
  // fits where (bk / 4) (TM + 4 + TN) words do. Tiles of up to 32 rows take 64 k per slice (a quarter of
  // the barriers): W8A8 gemm2 at MoE-B T = 256 went 460 -> 369 us on an H200 with the same bits
  // (reports/dot4-bk-h200-s9.txt). 128-row tiles cannot fit 64 and keep 16; `dot4Bk` overrides.
  const dk = gpuKernelTuning.dot4Bk ?? (t.tm <= 32 ? 64 : undefined);
  if (dk !== undefined && eng !== undefined && dot4Kernel(p, eng) && dk % 16 === 0 && (dk / 4) * (t.tm + 4 + t.tn) <= 4096) return { ...t, bk: dk };
  return t;
}

function unitCols(md: MemoryDesc): boolean {
  return md.strides[md.ndims - 1] === 1;
}

/**
 * A plain descriptor whose last dim has extent 1 with its column stride set to 1: the stride of a dim of
 * extent 1 never moves an address, so the layout is the same (e.g. a K = 1 src given as `acb`, which the
 * cpu engine takes); the same descriptor otherwise.
 */
function unitColumnOf(md: MemoryDesc): MemoryDesc {
  const last = md.ndims - 1;
  if (md.format !== 'blocked' || md.dims[last] !== 1 || md.strides[last] === 1) return md;
  return new MemoryDesc({ dims: md.dims, dataType: md.dataType, format: 'blocked', strides: md.strides.map((s, i) => (i === last ? 1 : s)) });
}

/** `p` with src and dst through `unitColumnOf` (`p` itself when neither changes). */
function unitColumnsOf(p: MatmulProblem): MatmulProblem {
  const src = unitColumnOf(p.src), dst = unitColumnOf(p.dst);
  return src === p.src && dst === p.dst ? p : { ...p, src, dst };
}

/**
 * What the kernels run for `p`: `p` itself, or for a dense matmul with more than one batch dim its inner
 * 3D problem, with its launches where the batch does not collapse into one (batch_dims.ts); a string
 * says why not.
 */
function launchPlan(p0: MatmulProblem): { q: MatmulProblem; launches: readonly BatchOffsets[] | undefined } | string {
  const p = unitColumnsOf(p0);
  // (tag.any weights resolve to plain row-major: weightsLayout)
  const split = splitBatch(p.weights.format === 'any' ? { ...p, weights: plainOf(p.weights) } : p);
  if (split === undefined) return { q: p, launches: undefined };
  if (typeof split === 'string') return split;
  return { q: split.inner, launches: split.outer.length > 1 ? split.outer : undefined };
}

function rejectReason(p: MatmulProblem, eng?: GpuEngine): string | undefined {
  // Float src with the attribute: webgpu:dynamic-quant quantizes it first (the weight-only kernels would ignore it).
  if (p.attr.dynamicQuantization && p.src.dataType !== 's8') return 'dynamic quantization runs on webgpu:dynamic-quant';
  if (p.weights.format === 'packed') return 'packed weights layouts are not implemented on the gpu engine yet (use plain abc / acb weights)';
  const plan = launchPlan(p);
  if (typeof plan === 'string') return plan;
  if (plan.q !== p) return rejectReason(plan.q, eng) ?? (plan.launches && eng ? launchesRejectReason(p, eng) : undefined);
  const fr = fusionRejectReason(p, eng);
  if (fr) return fr;
  const rowMaps = (p.moe.gather || p.moe.scatterTopK ? 1 : 0) + (p.moe.scatterTopK ? 1 : 0);
  if (eng && rowMaps && needsFusion(p)) {
    const used = 4 + (p.bias ? 1 : 0) + fusionStorageCount(gemmFusionOf(p)) + rowMaps;
    const limit = eng.device.limits.maxStorageBuffersPerShaderStage;
    if (used > limit) return `the matmul needs ${used} storage buffers (token index / slots, scales, zero points, binary src1 included), beyond the device's maxStorageBuffersPerShaderStage ${limit}`;
  }
  for (const [name, md] of [['src', p.src], ['dst', p.dst]] as const) {
    const last = md.ndims - 1;
    if (!unitCols(md)) return `src and dst need unit column strides on the gpu engine: ${name} dims[${last}] = ${md.dims[last]} has stride ${md.strides[last]} (reorder it to a row-major layout first; the stride of a dim of extent 1 does not matter)`;
  }
  if (eng) {
    const plan = planWindows(p, tileOf(p, eng).tm, eng.caps);
    if (typeof plan === 'string') return plan;
    const max = eng.caps.maxStorageBufferBindingSize;
    const others = [p.bias, ...Object.values(p.fusion.scales).map((q) => q.md), ...Object.values(p.fusion.zeroPoints).map((q) => q.md), ...p.fusion.binary.map((b) => b.md)];
    if (others.some((md) => md && md.getSize(0) > max)) return `a bias, scales, zero points or binary src1 larger than one storage binding (${max} bytes) is not implemented on the gpu engine yet`;
  }
  return undefined;
}

/** Batch launches bind whole buffers (each launch moves its element offsets in the kernel). */
function launchesRejectReason(p: MatmulProblem, eng: GpuEngine): string | undefined {
  const max = eng.caps.maxStorageBufferBindingSize;
  if ([p.src, p.weights, p.dst].some((md) => md.getSize(0) > max)) {
    return `a dense matmul whose batch dims do not collapse into one (several launches) with a src, weights or dst larger than one storage binding (${max} bytes) is not implemented on the gpu engine yet`;
  }
  return undefined;
}

/**
 * The tiled family member for `p` (webgpu_kernel_choice.ts): `dot4` for W8A8 (row modes and binding
 * windows included); `vec4` for f32 with whole-buffer bindings (row modes included); else `gemm-tiled`.
 */
function kernelOf(p: MatmulProblem, eng: GpuEngine): 'vec4' | 'dot4' | 'tiled' {
  if (dot4Kernel(p, eng)) return 'dot4';
  if (planWindows(p, tileOf(p, eng).tm, eng.caps) !== undefined) return 'tiled';
  return vec4Tile(p) !== undefined ? 'vec4' : 'tiled';
}

/**
 * Chunked weights staging (gemm_tiled_staging.ts): gemm-tiled only (dot4 and vec4 have their own
 * layouts), and with batch launches only where every launch's weights offset keeps the chunks aligned.
 */
function chunkOf(p: MatmulProblem, kernel: 'vec4' | 'dot4' | 'tiled', launches: readonly BatchOffsets[] | undefined): number {
  const v = kernel === 'tiled' ? bChunkOf(p) : 0;
  return v && launches?.some((o) => o.weights % v !== 0) ? 0 : v;
}

/** The row modes a problem needs in the kernel (gemm_rows.ts), undefined for a plain GEMM. */
function rowsOf(p: MatmulProblem): GemmRows | undefined {
  const m = p.moe;
  if (!m.gather && !m.scatterTopK && !m.zeroFill && !m.batchedCounts) return undefined;
  return { gather: m.gather, scatter: m.scatterTopK > 0, zeroFill: m.zeroFill, counts: m.batchedCounts };
}

/** The schedule's extra inputs (grouped_schedule.ts). */
function scheduleOf(p: MatmulProblem): ScheduleConfig {
  return { expertMap: p.moe.expertMap, rows: p.moe.gather ? 'gather' : p.moe.scatterTopK ? 'scatter' : 'none', counts: p.moe.batchedCounts };
}

/** The row-mode words after the 16 plain params: topK, then whole-buffer windows (offsets 0, every expert and row). */
function rowsParams(p: MatmulProblem, plain: Uint32Array, w?: { win: BindingWindow; offs: readonly number[] }): Uint32Array {
  const P = new Uint32Array(GEMM_ROWS_PARAMS_WORDS);
  P.set(plain);
  P.set(w ? [p.moe.scatterTopK, ...w.offs, w.win.eLo, w.win.eHi, w.win.rLo, w.win.rHi] : [p.moe.scatterTopK, 0, 0, 0, 0, 0xffffffff, 0, 0xffffffff], 16);
  return P;
}

/**
 * The row-mode params of one batch launch: the plain params with the bias offset (word 14), then topK
 * and the src / weights / dst element offsets as aOff / wOff / dOff, which the kernel subtracts from
 * its indices: stored negated (Uint32Array wraps modulo 2^32, as does the kernel's u32 arithmetic), they
 * move every index forward by the offset. Every tile is in the launch's window.
 */
function launchParams(p: MatmulProblem, plain: Uint32Array, o: BatchOffsets): Uint32Array {
  const P = new Uint32Array(GEMM_ROWS_PARAMS_WORDS);
  P.set(plain);
  P[14] = o.bias;
  P.set([p.moe.scatterTopK, -o.src, -o.weights, -o.dst, 0, 0xffffffff, 0, 0xffffffff], 16);
  return P;
}

/** A window's byte ranges of src, weights and dst (binding_windows.ts) for these buffers. */
function windowBindings(p: MatmulProblem, win: BindingWindow, align: number, bufs: readonly GPUBuffer[]): ReturnType<typeof rangeBinding>[] {
  return [rangeBinding(p.src, win.src, align, bufs[0].size), rangeBinding(p.weights, win.weights, align, bufs[1].size), rangeBinding(p.dst, win.dst, align, bufs[2].size)];
}

/** The tiled kernel's 16 u32 params for this problem (gemm_tiled.ts); bias strides are 0 along its broadcast dims, word 13 (bm) its row stride. */
function gemmParams(p: MatmulProblem, tilesN: number): Uint32Array {
  const s = p.src.strides, w = p.weights.strides, d = p.dst.strides;
  const b = p.bias;
  const bdim = (i: number): number => (b && b.dims[i] !== 1 ? b.strides[i] : 0);
  const nb = b?.ndims ?? 0;
  const P = new Uint32Array(16);
  if (p.kind === 'dense') {
    const nd = p.dst.ndims, batched = nd === 3;
    P.set([p.M, p.K, p.N, s[nd - 2], w[nd - 2], w[nd - 1], batched && p.weights.dims[0] !== 1 ? w[0] : 0, d[nd - 2],
      batched && p.src.dims[0] !== 1 ? s[0] : 0, batched ? d[0] : 0, batched && b ? bdim(0) : 0, b ? bdim(nb - 1) : 0, tilesN, b ? bdim(nb - 2) : 0]);
  } else if (p.kind === 'grouped_m') {
    P.set([p.M, p.K, p.N, s[0], w[1], w[2], w[0], d[0], 0, 0, b ? bdim(0) : 0, b ? bdim(1) : 0, tilesN, 0]);
  } else {
    P.set([p.M, p.K, p.N, s[0], w[0], w[1], 0, d[1], 0, d[0], b ? bdim(0) : 0, b ? bdim(nb - 1) : 0, tilesN, b ? bdim(nb - 2) : 0]);
  }
  return P;
}

/** Where a grouped execution's offsets live on the device, and what to call them in messages. */
function deviceGrouping(p: MatmulProblem, a: MatmulArgs<GpuMemory>): { primary: GPUBuffer; other: GPUBuffer | undefined; names: Grouping } {
  const leadingRows = p.kind === 'grouped_m' && p.offsetsArg === 'src' && !p.moe.gather && !p.moe.scatterTopK ? p.moe.zeroFill : undefined;
  const names = (primary: string, other?: string): Grouping => ({
    primary: { name: primary, handle: 0, view: new Int32Array(0) }, others: other ? [{ name: other, handle: 0, view: new Int32Array(0) }] : [],
    G: p.G, total: p.kind === 'grouped_k' ? p.K : p.M, variableDim: p.kind === 'grouped_k' ? 1 : 0, sizes: undefined, leadingRows,
  });
  if (p.moe.batchedCounts) return { primary: a.counts!.buffers[0], other: undefined, names: names('ARG.MOE_EXPERT_NUM_TOKENS') };
  if (p.kind === 'grouped_k') {
    const other = a.weights.buffers[1] !== a.src.buffers[1] ? a.weights.buffers[1] : undefined;
    return { primary: a.src.buffers[1], other, names: names('src', 'weights') };
  }
  if (p.offsetsFrom === 'attr') return { primary: a.offsets!.buffers[0], other: undefined, names: names(argName(ARG.ATTR_GROUPED_OFFSETS | ARG.SRC)) };
  // MoE gather: src is plain, dst holds the partition; scatter: dst is plain.
  if (p.offsetsArg === 'dst') return { primary: a.dst.buffers[1], other: undefined, names: names('dst') };
  const other = p.dst.isGrouped && a.dst.buffers[1] !== a.src.buffers[1] ? a.dst.buffers[1] : undefined;
  return { primary: a.src.buffers[1], other, names: names('src', 'dst') };
}

class WebgpuMatmulExecutor implements MatmulExecutor<GpuMemory> {
  private readonly p: MatmulProblem;
  private readonly eng: GpuEngine;
  private readonly cfg: GemmTiledConfig;
  private readonly gemm: GPUComputePipeline;
  private readonly sched: GPUComputePipeline | undefined;
  private readonly gemmParams: GPUBuffer;
  /** rfcs/0002 scales / zero points / binary / GLU (webgpu_fusion.ts), and their uniform. */
  private readonly fusion: GemmFusion | undefined;
  private readonly fusionParams: GPUBuffer | undefined;
  private readonly schedParams: GPUBuffer | undefined;
  private readonly schedBuf: GPUBuffer | undefined;
  private readonly sizesBuf: GPUBuffer | undefined;
  /** A scatter's first-row table (one word per dst row), written by the schedule's duplicate check. */
  private readonly firstBuf: GPUBuffer | undefined;
  private readonly schedCfg: ScheduleConfig;
  /** Tensors larger than one binding: the windows and each one's params (binding_windows.ts). */
  private readonly windows: { win: BindingWindow; params: GPUBuffer }[] | undefined;
  private readonly tilesN: number;
  private readonly tilesM: number;
  /** A dense matmul's batch launches (batch_dims.ts): each one's params and fusion uniform. */
  private readonly launches: { params: GPUBuffer; fusionParams: GPUBuffer | undefined }[] | undefined;

  /** `launches`: the outer batch launches of a dense matmul with more than one batch dim, `p` their inner 3D problem. */
  constructor(p: MatmulProblem, eng: GpuEngine, launches?: readonly BatchOffsets[]) {
    this.p = p;
    this.eng = eng;
    const t = tileOf(p, eng);
    const fusion = needsFusion(p) ? gemmFusionOf(p) : undefined;
    this.fusion = fusion && launches ? withLaunchOffsets(fusion) : fusion;
    const epilogue = this.fusion ? '' : eltwiseChainWgsl(p.attr.postOps.entries) ?? '';
    const plan = planWindows(p, t.tm, eng.caps);
    if (typeof plan === 'string') throw new Error(`webgpu matmul: ${plan}`);
    const rows = rowsOf(p) ?? (plan || launches ? { gather: false, scatter: false, zeroFill: false, counts: false } : undefined);
    const kernel = launches ? 'tiled' : kernelOf(p, eng);
    const bChunk = chunkOf(p, kernel, launches);
    const weiKBlocks = kernel === 'tiled' && this.fusion && !this.fusion.intAcc ? weiKBlocksOf(p, t.bk) : undefined;
    this.cfg = {
      mode: p.kind, ...t, src: p.src.dataType, wei: p.weights.dataType, dst: p.dst.dataType, bias: p.bias?.dataType, epilogue, fusion: this.fusion,
      ...(rows ? { rows } : {}), ...(bChunk ? { bChunk } : {}), ...(weiKBlocks ? { weiKBlocks } : {}), ...(launches ? { launchOffsets: true } : {}),
    };
    this.schedCfg = scheduleOf(p);
    const cfg = this.cfg;
    this.gemm = kernel === 'vec4'
      ? eng.pipeline(gemmTiledVec4Key(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledVec4Wgsl(cfg))
      : kernel === 'dot4'
        ? eng.pipeline(gemmTiledDot4Key(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledDot4Wgsl(cfg, this.fusion!))
        : eng.pipeline(gemmTiledKey(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledWgsl(cfg));
    // A GLU tile holds the gate and up columns of tn / 2 dst columns.
    this.tilesN = this.fusion?.glu ? Math.ceil(p.dstN / (t.tn / 2)) : Math.ceil(p.N / t.tn);
    this.tilesM = Math.ceil(p.M / t.tm);
    const uni = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    if (this.fusion && !launches) {
      const words = fusionUniform(p, this.fusion);
      this.fusionParams = eng.createBuffer(words.byteLength, 'matmul fusion params', uni);
      eng.write(this.fusionParams, 0, words.buffer as ArrayBuffer);
    }
    const params = rows ? rowsParams(p, gemmParams(p, this.tilesN)) : gemmParams(p, this.tilesN);
    this.gemmParams = eng.createBuffer(params.byteLength, 'matmul params', uni);
    eng.write(this.gemmParams, 0, params.buffer as ArrayBuffer);
    this.windows = plan?.map((win) => {
      // The element offsets depend only on the ranges (buffers at least as large as the descriptors).
      const offs = [[p.src, win.src], [p.weights, win.weights], [p.dst, win.dst]].map(([md, r]) =>
        rangeBinding(md as MemoryDesc, r as BindingWindow['src'], eng.caps.minStorageBufferOffsetAlignment, (md as MemoryDesc).getSize(0)).elemOffset);
      const words = rowsParams(p, gemmParams(p, this.tilesN), { win, offs });
      const buf = eng.createBuffer(words.byteLength, 'matmul window params', uni);
      eng.write(buf, 0, words.buffer as ArrayBuffer);
      return { win, params: buf };
    });
    this.launches = launches?.map((o) => {
      const params = eng.createBuffer(GEMM_ROWS_PARAMS_WORDS * 4, 'matmul batch launch params', uni);
      eng.write(params, 0, launchParams(p, gemmParams(p, this.tilesN), o).buffer as ArrayBuffer);
      let fusionParams: GPUBuffer | undefined;
      if (this.fusion) {
        const words = launchFusionUniform(p, this.fusion, o);
        fusionParams = eng.createBuffer(words.byteLength, 'matmul batch launch fusion params', uni);
        eng.write(fusionParams, 0, words.buffer as ArrayBuffer);
      }
      return { params, fusionParams };
    });
    if (p.kind !== 'dense' || p.moe.batchedCounts) {
      const sc = this.schedCfg;
      this.sched = eng.pipeline(groupedScheduleKey(sc), () => groupedScheduleWgsl(sc));
      this.schedParams = eng.createBuffer(SCHED_PARAMS_BYTES, 'matmul schedule params', uni);
      const words = p.kind === 'grouped_k' ? SCHED_HEADER_WORDS + p.G + 1 : p.moe.batchedCounts ? SCHED_HEADER_WORDS + p.batch[0] :
        scheduleWords(p.M, p.G + (p.moe.zeroFill ? 2 : 0), t.tm);
      if (p.moe.scatterTopK) this.firstBuf = eng.createBuffer(4 * p.moe.dstRows, 'matmul scatter first-row table');
      this.schedBuf = eng.createBuffer(words * 4, 'matmul schedule', GPUBufferUsage.STORAGE | GPUBufferUsage.INDIRECT);
      const sizes = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
      this.sizesBuf = eng.createBuffer(4 * (sizes?.length ?? 1), 'matmul group sizes');
      if (sizes) eng.write(this.sizesBuf, 0, Int32Array.from(sizes));
    }
  }

  task(a: MatmulArgs<GpuMemory>): StreamTask {
    return () => this.record(a);
  }

  private record(a: MatmulArgs<GpuMemory>): void {
    const { p, eng } = this;
    eng.checkAlive();
    const grouping = this.sched ? deviceGrouping(p, a) : undefined;
    const slot = grouping && eng.status.take((code, i, x, y) => code >= ROW_ERR.countNegative && code <= ROW_ERR.expertMap ? rowMapsError(p, code, i, x, y) :
      offsetsError(grouping.names, code, i, x, y, grouping.names.others[0]?.name));
    if (grouping && slot) {
      const sp = new Uint32Array(SCHED_PARAMS_BYTES / 4);
      const hasSizes = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
      const m = p.moe, counts = m.batchedCounts;
      const tokens = m.gather ? m.srcRows : m.scatterTopK ? m.dstRows / m.scatterTopK : 0;
      sp.set([counts ? p.batch[0] : p.G, p.kind === 'grouped_k' ? p.K : p.M, this.cfg.tm, this.tilesN, slot.word, grouping.other ? 1 : 0,
        p.kind === 'grouped_k' || counts ? 1 : 0, this.tilesM, hasSizes ? 1 : 0, m.zeroFill ? 1 : 0, m.experts, m.scatterTopK, tokens, m.scatterTopK ? m.dstRows : 0]);
      eng.writeParams(this.schedParams!, sp);
    }
    eng.computePass('matmul', (pass) => this.encode(pass, a, grouping, slot));
  }

  private encode(pass: PassRecorder, a: MatmulArgs<GpuMemory>, grouping: ReturnType<typeof deviceGrouping> | undefined, slot: StatusSlot | undefined): void {
    const { p, eng } = this;
    const common: GPUBindGroupEntry[] = [];
    if (a.bias) common.push({ binding: 5, resource: { buffer: a.bias.buffers[0] } });
    const fusion = (buffer: GPUBuffer | undefined): GPUBindGroupEntry[] => (this.fusion ? fusionEntries(p, this.fusion, { buffer: buffer! }, a) : []);
    if (a.tokenIndex) common.push({ binding: TOKEN_INDEX_BINDING, resource: { buffer: a.tokenIndex.buffers[0] } });
    if (a.tokenKs) common.push({ binding: TOKEN_KS_BINDING, resource: { buffer: a.tokenKs.buffers[0] } });
    const bufs = [a.src.buffers[0], a.weights.buffers[0], a.dst.buffers[0]];
    // One dispatch, or one per window of the tensors larger than one binding (binding_windows.ts), or one
    // per batch launch (batch_dims.ts), all in this pass.
    const whole = bufs.map((buffer, i) => ({ binding: i + 1, resource: { buffer } }));
    const dispatches: GPUBindGroupEntry[][] = this.windows ? this.windows.map(({ win, params }) => {
      const r = windowBindings(p, win, eng.caps.minStorageBufferOffsetAlignment, bufs);
      return [{ binding: 0, resource: { buffer: params } }, ...bufs.map((buffer, i) => ({ binding: i + 1, resource: { buffer, offset: r[i].offset, size: r[i].size } })), ...fusion(this.fusionParams)];
    }) : this.launches ? this.launches.map((l) => [{ binding: 0, resource: { buffer: l.params } }, ...whole, ...fusion(l.fusionParams)])
      : [[{ binding: 0, resource: { buffer: this.gemmParams } }, ...whole, ...fusion(this.fusionParams)]];
    if (grouping && slot) {
      pass.setPipeline(this.sched!);
      const sc = this.schedCfg;
      const entries: GPUBindGroupEntry[] = [
        { binding: 0, resource: { buffer: this.schedParams! } },
        { binding: 1, resource: { buffer: grouping.primary } },
        { binding: 4, resource: { buffer: this.schedBuf! } },
        { binding: 5, resource: slot.binding },
      ];
      // The counts mode reads neither a second offsets buffer nor sizes (auto layouts drop unused bindings).
      if (!sc.counts) entries.push({ binding: 2, resource: { buffer: grouping.other ?? grouping.primary } }, { binding: 3, resource: { buffer: this.sizesBuf! } });
      if (sc.expertMap) entries.push({ binding: 6, resource: { buffer: a.expertMap!.buffers[0] } });
      if (sc.rows !== 'none') entries.push({ binding: 7, resource: { buffer: a.tokenIndex!.buffers[0] } });
      if (sc.rows === 'scatter') entries.push({ binding: 8, resource: { buffer: a.tokenKs!.buffers[0] } }, { binding: 9, resource: { buffer: this.firstBuf! } });
      const sbg = eng.bindGroup(this.sched!, entries);
      eng.keepAlive(sbg, grouping);
      pass.setBindGroup(0, sbg);
      pass.dispatchWorkgroups(1);
      common.push({ binding: 4, resource: { buffer: this.schedBuf! } });
    }
    pass.setPipeline(this.gemm);
    // grouped_m: the schedule's tile table bounds the grid; grouped K and batched counts run every
    // (N, M, group) tile, returning at once after a schedule error. All direct: Dawn validates an
    // indirect dispatch with a compute pass of its own (0.7-1.1 ms each on an H100).
    const tableTiles = p.kind === 'grouped_m' && !p.moe.batchedCounts ? scheduleTileBound(p.M, p.G + (p.moe.zeroFill ? 2 : 0), this.cfg.tm) : undefined;
    for (const own of dispatches) {
      const entries = [...own, ...common];
      const bg = eng.bindGroup(this.gemm, entries);
      eng.keepAlive(bg, ...entries);
      pass.setBindGroup(0, bg);
      if (grouping && slot && tableTiles !== undefined) {
        const [x, y, z] = scheduleGrid(this.tilesN, tableTiles);
        if (x && y) pass.dispatchWorkgroups(x, y, z);
      } else if (grouping && slot) {
        const groups = p.moe.batchedCounts ? p.batch[0] : p.G;
        if (this.tilesN && this.tilesM && groups) pass.dispatchWorkgroups(this.tilesN, this.tilesM, groups);
      } else {
        const batch = p.batch.length ? p.batch[0] : 1;
        if (this.tilesN && this.tilesM && batch) pass.dispatchWorkgroups(this.tilesN, this.tilesM, batch);
      }
    }
  }

  destroy(): void {
    this.eng.retire(this.gemmParams, this.schedParams, this.schedBuf, this.sizesBuf, this.fusionParams, this.firstBuf, ...(this.windows ?? []).map((w) => w.params),
      ...(this.launches ?? []).flatMap((l) => [l.params, l.fusionParams]));
  }
}

/** WebGPU grouped / dense matmul: device-side offsets validation and tile schedule, then a tiled GEMM. */
export const webgpuMatmul: GpuMatmulImpl = {
  name: 'webgpu',
  describe(eng, p0) {
    const plan = launchPlan(p0);
    if (typeof plan === 'string') return 'webgpu';
    const { q: p, launches } = plan;
    const g = launches ? undefined : gemvPlan(p, eng);
    if (g) return gemvImplName(g);
    const t = tileOf(p, eng);
    const k = launches ? 'tiled' : kernelOf(p, eng);
    // gemm-tiled's staging (gemm_tiled_staging.ts): chunked weights loads, register prefetch.
    const staging = k === 'tiled' ? stagingKey({ ...t, bChunk: chunkOf(p, k, launches), fusion: needsFusion(p) ? gemmFusionOf(p) : undefined }) : '';
    const batches = launches ? `+${launches.length}-batch-launches` : '';
    return `webgpu:gemm-tiled${k === 'tiled' ? '' : `-${k}`}-${t.tm}x${t.tn}${staging}${p.kind === 'dense' && !p.moe.batchedCounts ? '' : '+grouped-schedule'}${batches}`;
  },
  reject(p, eng) {
    return rejectReason(p, eng);
  },
  weightsLayout(p) {
    // No gpu packing yet: tag.any resolves to plain row-major weights.
    return p.weights.format === 'any' ? plainOf(p.weights) : p.weights;
  },
  createExecutor(p0, eng) {
    const plan = launchPlan(p0);
    if (typeof plan === 'string') throw new Error(`webgpu matmul: ${plan}`);
    const { q: p, launches } = plan;
    if (launches) return new WebgpuMatmulExecutor(p, eng, launches);
    const g = gemvPlan(p, eng);
    if (g) return new WebgpuGemvExecutor(p, eng, g, gemmParams(p, 0), g.cfg.dense ? undefined : (a) => deviceGrouping(p, a));
    return new WebgpuMatmulExecutor(p, eng);
  },
};



function plainOf(md: MemoryDesc): MemoryDesc {
  return new MemoryDesc({ dims: md.dims, dataType: md.dataType, format: 'blocked', strides: tagToStrides('abcdefghijkl'.slice(0, md.ndims), md.dims, 'matmul') });
}
