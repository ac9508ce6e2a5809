import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import { gemmTiledKey, gemmTiledWgsl, type GemmTiledConfig } from '../../kernels/wgsl/gemm_tiled.js';
import { groupedScheduleWgsl, scheduleWords, SCHED_HEADER_WORDS } from '../../kernels/wgsl/grouped_schedule.js';
import { WGSL_ELTWISE_HELPERS, eltwiseChainWgsl } from '../../kernels/wgsl/wgsl_eltwise.js';
import type { GpuMatmulImpl, MatmulArgs, MatmulExecutor } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { offsetsError, type Grouping } from './runtime_offsets.js';
import { ARG, argName } from '../args.js';
import { fusionEntries, fusionRejectReason, fusionUniform, gemmFusionOf, needsFusion } from './webgpu_fusion.js';
import type { GemmFusion } from '../../kernels/wgsl/wgsl_quant.js';
import { gemmTiledVec4Key, gemmTiledVec4Wgsl, VEC4_BK, VEC4_TN } from '../../kernels/wgsl/gemm_tiled_vec4.js';
import { dot4Kernel, gemvPlan, vec4Tile } from './webgpu_kernel_choice.js';
import { gemmTiledDot4Key, gemmTiledDot4Wgsl } from '../../kernels/wgsl/gemm_tiled_dot4.js';
import { WebgpuGemvExecutor } from './webgpu_gemv.js';

/** Tile shape from the mean rows per group (the host knows the capacity, never the runtime sizes). */
function tileOf(p: MatmulProblem): { tm: number; tn: number; bk: number } {
  const v = vec4Tile(p);
  if (v !== undefined) return { tm: v, tn: VEC4_TN, bk: VEC4_BK };
  const rows = p.kind === 'grouped_m' ? p.M / Math.max(1, p.G) : p.M;
  if (rows <= 16) return { tm: 16, tn: 64, bk: 16 };
  if (rows <= 32) return { tm: 32, tn: 64, bk: 16 };
  if (rows <= 256 || p.N < 512) return { tm: 64, tn: 64, bk: 16 };
  return { tm: 128, tn: 128, bk: 8 };
}

function unitCols(md: MemoryDesc): boolean {
  return md.strides[md.ndims - 1] === 1;
}

function rejectReason(p: MatmulProblem, eng?: GpuEngine): string | undefined {
  if (p.weights.format === 'packed') return 'packed weights layouts are not implemented on the gpu engine yet (use plain abc / acb weights)';
  if (p.moe.gather || p.moe.scatterTopK || p.moe.batchedCounts) return 'MoE gather / scatter / batched token counts are not implemented on the gpu engine yet';
  if (p.moe.zeroFill) return 'zero-filled ungrouped rows (cuDNN none mode, attr.setZeroFillUngroupedRows) are not implemented on the gpu engine yet';
  if (p.moe.expertMap) return 'a group -> expert map (attr.setExpertMap) is not implemented on the gpu engine yet';
  const fr = fusionRejectReason(p, eng);
  if (fr) return fr;
  if (!unitCols(p.src) || !unitCols(p.dst)) return 'src and dst need unit column strides on the gpu engine';
  if (p.kind === 'dense' && p.batch.length > 1) return 'dense matmul with more than one batch dim is not implemented on the gpu engine yet';
  return undefined;
}

/** The tiled kernel's 16 u32 params for this problem (gemm_tiled.ts). */
function gemmParams(p: MatmulProblem, tilesN: number): Uint32Array {
  const s = p.src.strides, w = p.weights.strides, d = p.dst.strides;
  const b = p.bias;
  const bdim = (i: number): number => (b && b.dims[i] !== 1 ? b.strides[i] : 0);
  const nb = b?.ndims ?? 0;
  const P = new Uint32Array(16);
  if (p.kind === 'dense') {
    const nd = p.dst.ndims, batched = nd === 3;
    P.set([p.M, p.K, p.N, s[nd - 2], w[nd - 2], w[nd - 1], batched && p.weights.dims[0] !== 1 ? w[0] : 0, d[nd - 2],
      batched && p.src.dims[0] !== 1 ? s[0] : 0, batched ? d[0] : 0, batched && b ? bdim(0) : 0, b ? b.strides[nb - 1] : 0, tilesN, b ? bdim(nb - 2) : 0]);
  } else if (p.kind === 'grouped_m') {
    P.set([p.M, p.K, p.N, s[0], w[1], w[2], w[0], d[0], 0, 0, b ? bdim(0) : 0, b ? b.strides[1] : 0, tilesN, 0]);
  } else {
    P.set([p.M, p.K, p.N, s[0], w[0], w[1], 0, d[1], 0, d[0], b ? bdim(0) : 0, b ? b.strides[nb - 1] : 0, tilesN, b ? bdim(nb - 2) : 0]);
  }
  return P;
}

/** Where a grouped execution's offsets live on the device, and what to call them in messages. */
function deviceGrouping(p: MatmulProblem, a: MatmulArgs<GpuMemory>): { primary: GPUBuffer; other: GPUBuffer | undefined; names: Grouping } {
  const names = (primary: string, other?: string): Grouping => ({
    primary: { name: primary, handle: 0, view: new Int32Array(0) }, others: other ? [{ name: other, handle: 0, view: new Int32Array(0) }] : [],
    G: p.G, total: p.kind === 'grouped_k' ? p.K : p.M, variableDim: p.kind === 'grouped_k' ? 1 : 0, sizes: undefined,
  });
  if (p.kind === 'grouped_k') {
    const other = a.weights.buffers[1] !== a.src.buffers[1] ? a.weights.buffers[1] : undefined;
    return { primary: a.src.buffers[1], other, names: names('src', 'weights') };
  }
  if (p.offsetsFrom === 'attr') return { primary: a.offsets!.buffers[0], other: undefined, names: names(argName(ARG.ATTR_GROUPED_OFFSETS | ARG.SRC)) };
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
  private readonly tilesN: number;
  private readonly tilesM: number;

  constructor(p: MatmulProblem, eng: GpuEngine) {
    this.p = p;
    this.eng = eng;
    const t = tileOf(p);
    this.fusion = needsFusion(p) ? gemmFusionOf(p) : undefined;
    const epilogue = this.fusion ? '' : eltwiseChainWgsl(p.attr.postOps.entries) ?? '';
    this.cfg = { mode: p.kind, ...t, src: p.src.dataType, wei: p.weights.dataType, dst: p.dst.dataType, bias: p.bias?.dataType, epilogue, fusion: this.fusion };
    const cfg = this.cfg;
    this.gemm = vec4Tile(p) !== undefined
      ? eng.pipeline(gemmTiledVec4Key(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledVec4Wgsl(cfg))
      : dot4Kernel(p, eng)
        ? eng.pipeline(gemmTiledDot4Key(cfg) + gemmTiledKey(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledDot4Wgsl(cfg, this.fusion!))
        : eng.pipeline(gemmTiledKey(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledWgsl(cfg));
    // A GLU tile holds the gate and up columns of tn / 2 dst columns.
    this.tilesN = this.fusion?.glu ? Math.ceil(p.dstN / (t.tn / 2)) : Math.ceil(p.N / t.tn);
    this.tilesM = Math.ceil(p.M / t.tm);
    const uni = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    if (this.fusion) {
      const words = fusionUniform(p, this.fusion);
      this.fusionParams = eng.createBuffer(words.byteLength, 'matmul fusion params', uni);
      eng.write(this.fusionParams, 0, words.buffer as ArrayBuffer);
    }
    this.gemmParams = eng.createBuffer(64, 'matmul params', uni);
    eng.write(this.gemmParams, 0, gemmParams(p, this.tilesN).buffer as ArrayBuffer);
    if (p.kind !== 'dense') {
      this.sched = eng.pipeline('grouped-schedule', groupedScheduleWgsl);
      this.schedParams = eng.createBuffer(48, 'matmul schedule params', uni);
      const words = p.kind === 'grouped_k' ? SCHED_HEADER_WORDS + p.G + 1 : scheduleWords(p.M, p.G, t.tm);
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
    const grouping = p.kind === 'dense' ? undefined : deviceGrouping(p, a);
    const slot = grouping && eng.status.take((code, i, x, y) => offsetsError(grouping.names, code, i, x, y, grouping.names.others[0]?.name));
    if (grouping && slot) {
      const sp = new Uint32Array(12);
      const hasSizes = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
      sp.set([p.G, p.kind === 'grouped_k' ? p.K : p.M, this.cfg.tm, this.tilesN, slot.word, grouping.other ? 1 : 0, p.kind === 'grouped_k' ? 1 : 0, this.tilesM, hasSizes ? 1 : 0]);
      eng.write(this.schedParams!, 0, sp);
    }
    eng.encode('matmul', (enc) => this.encode(enc, a, grouping, slot));
  }

  private encode(enc: GPUCommandEncoder, a: MatmulArgs<GpuMemory>, grouping: ReturnType<typeof deviceGrouping> | undefined, slot: { buffer: GPUBuffer } | undefined): void {
    const { p, eng } = this;
    const dev = eng.device;
    const pass = enc.beginComputePass({ label: 'matmul' });
    const gemmEntries: GPUBindGroupEntry[] = [
      { binding: 0, resource: { buffer: this.gemmParams } },
      { binding: 1, resource: { buffer: a.src.buffers[0] } },
      { binding: 2, resource: { buffer: a.weights.buffers[0] } },
      { binding: 3, resource: { buffer: a.dst.buffers[0] } },
    ];
    if (a.bias) gemmEntries.push({ binding: 5, resource: { buffer: a.bias.buffers[0] } });
    if (this.fusion) gemmEntries.push(...fusionEntries(p, this.fusion, this.fusionParams!, a));
    if (!grouping || !slot) {
      const batch = p.batch.length ? p.batch[0] : 1;
      pass.setPipeline(this.gemm);
      const bg = dev.createBindGroup({ layout: this.gemm.getBindGroupLayout(0), entries: gemmEntries });
      eng.keepAlive(bg, ...gemmEntries);
      pass.setBindGroup(0, bg);
      if (this.tilesN && this.tilesM && batch) pass.dispatchWorkgroups(this.tilesN, this.tilesM, batch);
    } else {
      pass.setPipeline(this.sched!);
      const sbg = dev.createBindGroup({
        layout: this.sched!.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: this.schedParams! } },
          { binding: 1, resource: { buffer: grouping.primary } },
          { binding: 2, resource: { buffer: grouping.other ?? grouping.primary } },
          { binding: 3, resource: { buffer: this.sizesBuf! } },
          { binding: 4, resource: { buffer: this.schedBuf! } },
          { binding: 5, resource: { buffer: slot.buffer } },
        ],
      });
      pass.setBindGroup(0, sbg);
      pass.dispatchWorkgroups(1);
      gemmEntries.push({ binding: 4, resource: { buffer: this.schedBuf! } });
      pass.setPipeline(this.gemm);
      const gbg = dev.createBindGroup({ layout: this.gemm.getBindGroupLayout(0), entries: gemmEntries });
      eng.keepAlive(sbg, gbg, grouping, ...gemmEntries);
      pass.setBindGroup(0, gbg);
      pass.dispatchWorkgroupsIndirect(this.schedBuf!, 0);
    }
    pass.end();
    eng.keepAlive(pass);
  }

  destroy(): void {
    this.eng.retire(this.gemmParams, this.schedParams, this.schedBuf, this.sizesBuf, this.fusionParams);
  }
}

/** WebGPU grouped / dense matmul: device-side offsets validation and tile schedule, then a tiled GEMM. */
export const webgpuMatmul: GpuMatmulImpl = {
  name: 'webgpu',
  describe(eng, p) {
    const g = gemvPlan(p);
    if (g) return `webgpu:gemv-splitk-r${g.cfg.rows}-kg${g.cfg.kSplit}${g.cfg.vec ? '-vec' : ''}+grouped-schedule`;
    const t = tileOf(p);
    return `webgpu:gemm-tiled${vec4Tile(p) !== undefined ? '-vec4' : dot4Kernel(p, eng) ? '-dot4' : ''}-${t.tm}x${t.tn}${p.kind === 'dense' ? '' : '+grouped-schedule'}`;
  },
  reject(p, eng) {
    return rejectReason(p, eng);
  },
  weightsLayout(p) {
    // No gpu packing yet: tag.any resolves to plain row-major weights.
    return p.weights.format === 'any' ? plainOf(p.weights) : p.weights;
  },
  createExecutor(p, eng) {
    const g = gemvPlan(p);
    if (g) return new WebgpuGemvExecutor(p, eng, g, gemmParams(p, 0), (a) => deviceGrouping(p, a));
    return new WebgpuMatmulExecutor(p, eng);
  },
};



function plainOf(md: MemoryDesc): MemoryDesc {
  return new MemoryDesc({ dims: md.dims, dataType: md.dataType, format: 'blocked', strides: tagToStrides('abcdefghijkl'.slice(0, md.ndims), md.dims, 'matmul') });
}
