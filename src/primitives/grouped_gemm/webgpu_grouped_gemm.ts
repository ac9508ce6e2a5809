import { DnnlError } from '../../common/status.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { QuantArg } from '../../attr/fusion.js';
import { gemmTiledKey, gemmTiledWgsl, type GemmTiledConfig } from '../../kernels/wgsl/gemm_tiled.js';
import { WGSL_ELTWISE_HELPERS, eltwiseChainWgsl } from '../../kernels/wgsl/wgsl_eltwise.js';
import { fusionStorageCount, type GemmFusion } from '../../kernels/wgsl/wgsl_quant.js';
import { fusionEntries, fusionUniform, gemmFusionOf, needsFusion, subjectRejectReason, type FusionArgs, type FusionSubject } from '../matmul/webgpu_fusion.js';
import { DIMS_ERR_TILES, EXPERT_ARGS_WORDS, EXPERT_INFO_WORDS, expertDimsWgsl } from '../../kernels/wgsl/expert_dims.js';
import type { GpuGroupedGemmImpl, GroupedGemmArgs, GroupedGemmExecutor } from './impl_list.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { gpuRowCapacity, runtimeDimsError } from './runtime_dims.js';

/** Bytes between experts' GEMM params in the params buffer: minUniformBufferOffsetAlignment's default and maximum. */
const PARAMS_STRIDE = 256;
const PARAMS_BYTES = 64;

interface Tile {
  readonly tm: number;
  readonly tn: number;
  readonly bk: number;
}

/**
 * Tile of one expert from its row capacity (the host never knows the runtime rows): small capacities
 * (decode) take short M tiles; a capacity that would need more than one dispatch dimension of M tiles
 * takes the tallest tile.
 */
function tileFor(cap: number, N: number, maxY: number): Tile {
  const t = cap <= 16 ? { tm: 16, tn: 64, bk: 16 } : cap <= 32 ? { tm: 32, tn: 64, bk: 16 } : cap <= 256 || N < 512 ? { tm: 64, tn: 64, bk: 16 } : { tm: 128, tn: 128, bk: 8 };
  return Math.ceil(cap / t.tm) > maxY ? { tm: 128, tn: 128, bk: 8 } : t;
}

/** Expert i as the fusion helpers see it: its own descriptors and fusion, the primitive's attr. */
function subjectOf(p: GroupedGemmProblem, i: number): FusionSubject {
  return { ...p.experts[i], attr: p.attr };
}

/** Expert i's gemm-tiled fusion (scales, zero points, binary, sum, GLU, non-float types), undefined for a plain float GEMM. */
function expertFusion(p: GroupedGemmProblem, i: number): GemmFusion | undefined {
  const s = subjectOf(p, i);
  return needsFusion(s) ? gemmFusionOf(s) : undefined;
}

function rejectReason(p: GroupedGemmProblem, eng: GpuEngine): string | undefined {
  if (p.experts.some((e) => e.weights.format === 'packed')) return 'packed weights layouts are not implemented on the gpu engine yet (use plain ab / ba weights)';
  const why = subjectRejectReason(subjectOf(p, 0));
  if (why) return why;
  const limit = eng.device.limits.maxStorageBuffersPerShaderStage;
  for (let i = 0; i < p.G; i++) {
    const f = expertFusion(p, i);
    const used = 3 + (f ? fusionStorageCount(f) : 0);
    if (used > limit) return `expert ${i}'s GEMM needs ${used} storage buffers (scales, zero points, binary src1 included), beyond the device's maxStorageBuffersPerShaderStage ${limit}`;
  }
  const maxX = eng.caps.maxComputeWorkgroupsPerDimension;
  const wide = p.experts.findIndex((e) => Math.ceil(e.N / 64) > maxX);
  if (wide >= 0) return `expert ${wide}'s N = ${p.experts[wide].N} needs more than ${maxX} column tiles in one dispatch`;
  return undefined;
}

/** Column tiles of expert e: a GLU tile holds the gate and up columns of tn / 2 dst columns. */
function tilesN(e: Expert, t: Tile, f: GemmFusion | undefined): number {
  return f?.glu ? Math.ceil(e.dstN / (t.tn / 2)) : Math.ceil(e.N / t.tn);
}

/** Expert i's fusion operands of one execution (rfcs/0002 per-expert memories; shared binary src1 as given for every expert). */
function expertFusionArgs(a: GroupedGemmArgs<GpuMemory>, i: number): FusionArgs {
  const pick = (r: Readonly<Partial<Record<QuantArg, readonly GpuMemory[]>>>): Partial<Record<QuantArg, GpuMemory>> =>
    Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v?.[i]]));
  return { scales: pick(a.scales), zeroPoints: pick(a.zeroPoints), binary: a.binary.map((b) => b[i]) };
}

/** Expert e's 16 gemm-tiled params (dense mode, one batch); M (word 0) is written on the device per execution. */
function expertParams(e: Expert): Uint32Array {
  const P = new Uint32Array(PARAMS_BYTES / 4);
  P.set([0, e.K, e.N, e.src.strides[0], e.weights.strides[0], e.weights.strides[1], 0, e.dst.strides[0]]);
  return P;
}

/** The buffers an execution binds, compared by identity for the bind-group cache. */
function sameBuffers(a: readonly GPUBuffer[], b: readonly GPUBuffer[] | undefined): boolean {
  return b !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);
}

class WebgpuGroupedGemmExecutor implements GroupedGemmExecutor<GpuMemory> {
  private readonly epilogue: string;
  /** Each expert's fusion (undefined: a plain float GEMM with the eltwise epilogue). */
  private readonly fusions: (GemmFusion | undefined)[];
  /** Each expert's fusion uniform (wgsl_quant.ts), `fusionStride` bytes apart, and their sizes. */
  private readonly fusionParams: GPUBuffer | undefined;
  private readonly fusionStride: number;
  private readonly fusionBytes: number[];
  private readonly dimsPipe: GPUComputePipeline;
  /** Per-expert gemm-tiled params, PARAMS_STRIDE bytes apart; word 0 (M) written by the expert-dims pass. */
  private readonly params: GPUBuffer;
  /** Per-expert indirect dispatch args (EXPERT_ARGS_WORDS words each), written by the expert-dims pass. */
  private readonly args: GPUBuffer;
  /** Per-expert capacity, tm, N tiles, max y tiles (EXPERT_INFO_WORDS words each), written by the host per execution. */
  private readonly info: GPUBuffer;
  private readonly dimsParams: GPUBuffer;
  /**
   * Stand in for zero-size caller buffers (WebGPU binds no empty range; such an expert has 0 rows of
   * capacity): one for read bindings, one for dst, since a buffer may not be read and written in one dispatch.
   */
  private readonly emptyIn: GPUBuffer;
  private readonly emptyOut: GPUBuffer;
  private lastInfo: Uint32Array | undefined;
  private cache: { key: GPUBuffer[]; tiles: Tile[]; gemm: GPUBindGroup[] } | undefined;

  constructor(private readonly p: GroupedGemmProblem, private readonly eng: GpuEngine) {
    this.epilogue = eltwiseChainWgsl(p.attr.postOps.entries) ?? '';
    this.fusions = p.experts.map((_, i) => expertFusion(p, i));
    const words = this.fusions.map((f, i) => (f ? fusionUniform(subjectOf(p, i), f) : new Uint32Array(0)));
    this.fusionBytes = words.map((w) => w.byteLength);
    this.fusionStride = Math.ceil(Math.max(...this.fusionBytes) / PARAMS_STRIDE) * PARAMS_STRIDE;
    if (this.fusionStride > 0) {
      const all = new Uint32Array((p.G * this.fusionStride) / 4);
      words.forEach((w, i) => all.set(w, (i * this.fusionStride) / 4));
      this.fusionParams = eng.createBuffer(all.byteLength, 'grouped_gemm fusion params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      eng.write(this.fusionParams, 0, all);
    }
    this.dimsPipe = eng.pipeline('expert-dims', expertDimsWgsl);
    const G = p.G;
    const storage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
    this.params = eng.createBuffer(G * PARAMS_STRIDE, 'grouped_gemm params', GPUBufferUsage.UNIFORM | storage);
    this.args = eng.createBuffer(G * EXPERT_ARGS_WORDS * 4, 'grouped_gemm dispatch args', GPUBufferUsage.STORAGE | GPUBufferUsage.INDIRECT);
    this.info = eng.createBuffer(G * EXPERT_INFO_WORDS * 4, 'grouped_gemm expert info', storage);
    this.dimsParams = eng.createBuffer(16, 'grouped_gemm dims params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    this.emptyIn = eng.createBuffer(16, 'grouped_gemm empty input binding');
    this.emptyOut = eng.createBuffer(16, 'grouped_gemm empty dst binding');
    const all = new Uint32Array((G * PARAMS_STRIDE) / 4);
    p.experts.forEach((e, i) => all.set(expertParams(e), (i * PARAMS_STRIDE) / 4));
    eng.write(this.params, 0, all);
  }

  task(a: GroupedGemmArgs<GpuMemory>): StreamTask {
    return () => this.encode(a);
  }

  private gemmPipeline(t: Tile, i: number): GPUComputePipeline {
    const e0 = this.p.experts[0];
    const fusion = this.fusions[i];
    const cfg: GemmTiledConfig = { mode: 'dense', ...t, src: e0.src.dataType, wei: e0.weights.dataType, dst: e0.dst.dataType, bias: undefined, epilogue: fusion ? '' : this.epilogue, fusion };
    return this.eng.pipeline(gemmTiledKey(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledWgsl(cfg));
  }

  private encode(a: GroupedGemmArgs<GpuMemory>): void {
    const { p, eng } = this;
    eng.checkAlive();
    const G = p.G;
    const maxY = eng.caps.maxComputeWorkgroupsPerDimension;
    // Host-known per execution: each expert's capacity (from its buffers' sizes) and the tile it takes.
    const info = new Uint32Array(G * EXPERT_INFO_WORDS);
    const tiles = p.experts.map((e, i) => {
      const cap = Math.min(gpuRowCapacity(a.src[i]), gpuRowCapacity(a.dst[i]));
      const t = tileFor(cap, e.N, maxY);
      info.set([cap, t.tm, tilesN(e, t, this.fusions[i]), maxY], i * EXPERT_INFO_WORDS);
      return t;
    });
    if (!this.lastInfo || !this.lastInfo.every((x, i) => x === info[i])) {
      eng.write(this.info, 0, info);
      this.lastInfo = info;
    }
    const slot = eng.status.take((code, i, x, y) => code === DIMS_ERR_TILES
      ? new DnnlError('runtime_error', `grouped_gemm: ARG.RUNTIME_DIMS[${i}] = ${x} rows need more than ${maxY} row tiles of ${tiles[i]?.tm ?? 0} in one dispatch on this gpu engine`)
      : runtimeDimsError(code, i, x, y));
    eng.writeParams(this.dimsParams, new Uint32Array([G, slot.word, PARAMS_STRIDE / 4, 0]));
    const groups = this.bindGroups(a, tiles, slot.binding);
    eng.encode('grouped_gemm', (enc) => {
      const pass = enc.beginComputePass({ label: 'grouped_gemm' });
      pass.setPipeline(this.dimsPipe);
      pass.setBindGroup(0, groups.dims);
      pass.dispatchWorkgroups(1);
      // One indirect dispatch per expert: WGSL cannot index an array of buffers, so each expert binds its own.
      for (let i = 0; i < G; i++) {
        pass.setPipeline(this.gemmPipeline(tiles[i], i));
        pass.setBindGroup(0, groups.gemm[i]);
        pass.dispatchWorkgroupsIndirect(this.args, i * EXPERT_ARGS_WORDS * 4);
      }
      pass.end();
    });
  }

  /** Bind groups of this set of buffers and tiles: reused while the execution's memories and status block stay the same. */
  private bindGroups(a: GroupedGemmArgs<GpuMemory>, tiles: Tile[], status: GPUBufferBinding): { gemm: GPUBindGroup[]; dims: GPUBindGroup } {
    const nonEmpty = (b: GPUBuffer, out = false): GPUBuffer => (b.size > 0 ? b : out ? this.emptyOut : this.emptyIn);
    const fusionMems = [...Object.values(a.scales), ...Object.values(a.zeroPoints), ...a.binary].flatMap((list) => list ?? []);
    const key = [a.runtimeDims.buffers[0], ...[...a.src, ...a.weights, ...a.dst, ...fusionMems].map((m) => m.buffers[0])];
    // The status slot's range changes with the execution's place after the wait: the engine's cache.
    const dims = this.eng.bindGroup(this.dimsPipe, [
      { binding: 0, resource: { buffer: this.dimsParams } },
      { binding: 1, resource: { buffer: nonEmpty(a.runtimeDims.buffers[0]) } },
      { binding: 2, resource: { buffer: this.info } },
      { binding: 3, resource: { buffer: this.params } },
      { binding: 4, resource: { buffer: this.args } },
      { binding: 5, resource: status },
    ]);
    const c = this.cache;
    if (c && sameBuffers(key, c.key) && c.tiles.every((t, i) => t.tm === tiles[i].tm && t.tn === tiles[i].tn && t.bk === tiles[i].bk)) return { gemm: c.gemm, dims };
    const dev = this.eng.device;
    const gemm = tiles.map((t, i) => {
      const f = this.fusions[i];
      const fusion = f ? fusionEntries(subjectOf(this.p, i), f, { buffer: this.fusionParams!, offset: i * this.fusionStride, size: this.fusionBytes[i] },
        expertFusionArgs(a, i), (m) => nonEmpty(m.buffers[0])) : [];
      return dev.createBindGroup({
        label: `grouped_gemm expert ${i}`,
        layout: this.gemmPipeline(t, i).getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: this.params, offset: i * PARAMS_STRIDE, size: PARAMS_BYTES } },
          { binding: 1, resource: { buffer: nonEmpty(a.src[i].buffers[0]) } },
          { binding: 2, resource: { buffer: nonEmpty(a.weights[i].buffers[0]) } },
          { binding: 3, resource: { buffer: nonEmpty(a.dst[i].buffers[0], true) } },
          ...fusion,
        ],
      });
    });
    this.cache = { key, tiles, gemm };
    return { gemm, dims };
  }

  destroy(): void {
    this.cache = undefined;
    this.eng.retire(this.params, this.args, this.info, this.dimsParams, this.emptyIn, this.emptyOut, this.fusionParams);
  }
}

/**
 * Proposal #3 on the gpu engine: an `expert-dims` pass validates the runtime rows on the device and
 * writes each expert's M and dispatch arguments, then one indirect `gemm-tiled` (dense mode) dispatch
 * per expert, each with its own bind group (WGSL has no pointer tables): the expert's tensors and its
 * own fusion operands (scales, zero points, per-row binary src1) and fusion uniform.
 */
export const webgpuGroupedGemm: GpuGroupedGemmImpl = {
  name: 'webgpu',
  describe() {
    return 'webgpu:gemm-tiled+expert-dims';
  },
  reject(p, eng) {
    return rejectReason(p, eng);
  },
  weightsLayout(e) {
    // No gpu packing yet: tag.any resolves to plain row-major weights.
    return new MemoryDesc({ dims: e.weights.dims, dataType: e.weights.dataType, format: 'blocked', strides: tagToStrides('ab', e.weights.dims, 'weights') });
  },
  createExecutor(p, eng) {
    return new WebgpuGroupedGemmExecutor(p, eng);
  },
};
