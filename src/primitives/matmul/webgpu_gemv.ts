import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine, PassRecorder } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import { GEMV_PARAMS_WORDS, GEMV_PARTIALS_BINDING, GEMV_SCHED_WORD, gemvBindings, gemvSplitKKey, gemvSplitKReduceWgsl, gemvSplitKWgsl } from '../../kernels/wgsl/gemm_splitk_gemv.js';
import {
  groupedScheduleKey, groupedScheduleWgsl, INLINE_MAP_BINDING, INLINE_OFFS_BINDING, INLINE_OTHER_BINDING, INLINE_SIZES_BINDING, INLINE_STATUS_BINDING,
  SCHED_PARAMS_BYTES, scheduleGrid, scheduleTileBound, scheduleWords, type ScheduleConfig,
} from '../../kernels/wgsl/grouped_schedule.js';
import { TOKEN_INDEX_BINDING, TOKEN_KS_BINDING } from '../../kernels/wgsl/gemm_rows.js';
import { WGSL_ELTWISE_HELPERS } from '../../kernels/wgsl/wgsl_eltwise.js';
import type { MatmulArgs, MatmulExecutor } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { offsetsError, type Grouping } from './runtime_offsets.js';
import { fusionEntries, fusionUniform } from './webgpu_fusion.js';
import type { GemvPlan } from './webgpu_kernel_choice.js';
import { ROW_ERR, rowMapsError } from './row_maps.js';

/** Where a grouped execution's offsets live on the device (webgpu_matmul.ts deviceGrouping). */
export type DeviceGrouping = { primary: GPUBuffer; other: GPUBuffer | undefined; names: Grouping };

/** `pd.implInfo` of the decode kernel: `+inline-schedule` where the GEMM finds its tiles itself, no suffix for a dense GEMM. */
export function gemvImplName(g: GemvPlan): string {
  return `webgpu:gemv-splitk-r${g.cfg.rows}-kg${g.cfg.kSplit}${g.cfg.vec ? '-vec' : ''}${g.cfg.dense ? '' : `+${g.cfg.inline ? 'inline' : 'grouped'}-schedule`}`;
}

/**
 * The decode executor of the gpu matmul (grouped M, few rows per group; or a dense GEMM of few rows):
 * `gemv-splitk`, and with K split across workgroups its reduce pass, all in the engine's shared compute
 * pass. At decode sizes (plan.cfg.inline) each workgroup validates the runtime data and finds its tile
 * itself; above them the device schedule (grouped_schedule.ts, TM = the plan's rows) runs first as a
 * dispatch of its own. A dense GEMM (plan.cfg.dense) has neither: its rows are the params' M.
 */
export class WebgpuGemvExecutor implements MatmulExecutor<GpuMemory> {
  private readonly main: GPUComputePipeline;
  private readonly reduce: GPUComputePipeline | undefined;
  private readonly sched: GPUComputePipeline | undefined;
  private readonly params: GPUBuffer;
  /** The gemv params: written per execution only with the in-kernel schedule (hasOther may change). */
  private readonly paramWords: Uint32Array<ArrayBuffer>;
  private readonly schedParams: GPUBuffer | undefined;
  private readonly schedBuf: GPUBuffer | undefined;
  private readonly sizesBuf: GPUBuffer | undefined;
  private readonly partials: GPUBuffer | undefined;
  private readonly fusionParams: GPUBuffer | undefined;
  private readonly sizes: readonly number[] | undefined;
  /** A scatter's first-row table (one word per dst row), written by the schedule's duplicate check. */
  private readonly firstBuf: GPUBuffer | undefined;
  private readonly schedCfg: ScheduleConfig;

  constructor(
    private readonly p: MatmulProblem,
    private readonly eng: GpuEngine,
    private readonly plan: GemvPlan,
    /** The 16 gemm-tiled params of `p` (webgpu_matmul.ts gemmParams); words 13..15 are set here. */
    params: Uint32Array,
    /** Where the offsets live; undefined for a dense GEMM (cfg.dense: the rows are P.M). */
    private readonly grouping: ((a: MatmulArgs<GpuMemory>) => DeviceGrouping) | undefined,
  ) {
    const cfg = plan.cfg;
    this.main = eng.pipeline(gemvSplitKKey(cfg, 'main'), () => WGSL_ELTWISE_HELPERS + gemvSplitKWgsl(cfg));
    if (cfg.kSplit > 1) {
      this.reduce = eng.pipeline(gemvSplitKKey(cfg, 'reduce'), () => WGSL_ELTWISE_HELPERS + gemvSplitKReduceWgsl(cfg));
      this.partials = eng.createBuffer(cfg.kSplit * p.M * p.N * 4, 'matmul split-K partial sums');
    }
    const uni = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    const P = new Uint32Array(GEMV_PARAMS_WORDS);
    P.set(params);
    P.set([plan.colTiles, cfg.kSplit, plan.kChunk, p.moe.scatterTopK, p.dstN], 13);
    const m = p.moe;
    const tokens = m.gather ? m.srcRows : m.scatterTopK ? m.dstRows / m.scatterTopK : 0;
    this.sizes = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
    P.set([p.G, p.M, 0, this.sizes ? 1 : 0, m.zeroFill ? 1 : 0, m.experts, tokens], GEMV_SCHED_WORD);
    this.paramWords = P;
    this.params = eng.createBuffer(P.byteLength, 'matmul params', uni);
    if (!cfg.inline) eng.write(this.params, 0, P.buffer as ArrayBuffer);
    if (cfg.fusion) {
      const words = fusionUniform(p, cfg.fusion);
      this.fusionParams = eng.createBuffer(words.byteLength, 'matmul fusion params', uni);
      eng.write(this.fusionParams, 0, words.buffer as ArrayBuffer);
    }
    // The schedule validates the row maps / expert map and writes the tiles (expert, rows), ZERO_TILE ones too.
    const sc: ScheduleConfig = { expertMap: p.moe.expertMap, rows: cfg.moe.gather ? 'gather' : cfg.moe.scatter ? 'scatter' : 'none', counts: false };
    this.schedCfg = sc;
    if (!cfg.inline && !cfg.dense) {
      this.sched = eng.pipeline(groupedScheduleKey(sc), () => groupedScheduleWgsl(sc));
      this.schedParams = eng.createBuffer(SCHED_PARAMS_BYTES, 'matmul schedule params', uni);
      this.schedBuf = eng.createBuffer(scheduleWords(p.M, p.G + (cfg.moe.zeroFill ? 2 : 0), cfg.rows) * 4, 'matmul schedule', GPUBufferUsage.STORAGE | GPUBufferUsage.INDIRECT);
      if (cfg.moe.scatter) this.firstBuf = eng.createBuffer(4 * p.moe.dstRows, 'matmul scatter first-row table');
    }
    if (!cfg.dense) this.sizesBuf = eng.createBuffer(4 * (this.sizes?.length ?? 1), 'matmul group sizes');
    if (this.sizes && this.sizesBuf) eng.write(this.sizesBuf, 0, Int32Array.from(this.sizes));
  }

  task(a: MatmulArgs<GpuMemory>): StreamTask {
    return () => this.record(a);
  }

  private record(a: MatmulArgs<GpuMemory>): void {
    const { p, eng } = this;
    eng.checkAlive();
    const grouping = this.grouping?.(a);
    const slot = grouping && eng.status.take((code, i, x, y) => code >= ROW_ERR.countNegative && code <= ROW_ERR.expertMap ? rowMapsError(p, code, i, x, y) :
      offsetsError(grouping.names, code, i, x, y, grouping.names.others[0]?.name));
    if (!grouping || !slot) {
      // Dense: the params (P.M the rows) were written at creation; nothing runtime to validate.
    } else if (this.plan.cfg.inline) {
      this.paramWords[GEMV_SCHED_WORD + 2] = grouping.other ? 1 : 0;
      eng.writeParams(this.params, this.paramWords);
    } else {
      const sp = new Uint32Array(SCHED_PARAMS_BYTES / 4);
      const m = p.moe;
      const tokens = m.gather ? m.srcRows : m.scatterTopK ? m.dstRows / m.scatterTopK : 0;
      // The schedule writes x = column tiles x K splits into the indirect arguments.
      sp.set([p.G, p.M, this.plan.cfg.rows, this.plan.colTiles * this.plan.cfg.kSplit, slot.word, grouping.other ? 1 : 0, 0, 0, this.sizes ? 1 : 0,
        m.zeroFill ? 1 : 0, m.experts, m.scatterTopK, tokens, m.scatterTopK ? m.dstRows : 0]);
      eng.writeParams(this.schedParams!, sp);
    }
    let all: Map<number, GPUBindGroupEntry> | undefined;
    eng.computePass('matmul', (pass) => { all = this.encode(pass, a, grouping, slot?.binding); });
    // The reduce records into the same shared pass; while profiling it is timed as a pass of its own.
    if (this.reduce) eng.computePass('matmul.reduce', (pass) => this.encodeReduce(pass, all!));
  }

  /** The schedule (if any) and the main pass; returns every binding either pass may use. */
  private encode(pass: PassRecorder, a: MatmulArgs<GpuMemory>, grouping: DeviceGrouping | undefined, status: GPUBufferBinding | undefined): Map<number, GPUBindGroupEntry> {
    const { p, eng, plan } = this;
    const cfg = plan.cfg;
    const sc = this.schedCfg;
    if (this.sched && grouping && status) {
      const sEntries: GPUBindGroupEntry[] = [
        { binding: 0, resource: { buffer: this.schedParams! } },
        { binding: 1, resource: { buffer: grouping.primary } },
        { binding: 2, resource: { buffer: grouping.other ?? grouping.primary } },
        { binding: 3, resource: { buffer: this.sizesBuf! } },
        { binding: 4, resource: { buffer: this.schedBuf! } },
        { binding: 5, resource: status },
      ];
      if (sc.expertMap) sEntries.push({ binding: 6, resource: { buffer: a.expertMap!.buffers[0] } });
      if (sc.rows !== 'none') sEntries.push({ binding: 7, resource: { buffer: a.tokenIndex!.buffers[0] } });
      if (sc.rows === 'scatter') sEntries.push({ binding: 8, resource: { buffer: a.tokenKs!.buffers[0] } }, { binding: 9, resource: { buffer: this.firstBuf! } });
      const sbg = eng.bindGroup(this.sched, sEntries);
      pass.setPipeline(this.sched);
      pass.setBindGroup(0, sbg);
      pass.dispatchWorkgroups(1);
      eng.keepAlive(sbg, ...sEntries);
    }
    // Every binding either pass may use; each pipeline's auto layout holds exactly gemvBindings(cfg, pass).
    const all = new Map<number, GPUBindGroupEntry>();
    const put = (binding: number, buffer: GPUBuffer | undefined): void => { if (buffer) all.set(binding, { binding, resource: { buffer } }); };
    put(0, this.params);
    put(1, a.src.buffers[0]);
    put(2, a.weights.buffers[0]);
    put(3, a.dst.buffers[0]);
    put(4, this.schedBuf);
    put(INLINE_OFFS_BINDING, grouping?.primary);
    put(INLINE_OTHER_BINDING, grouping && (grouping.other ?? grouping.primary));
    put(INLINE_SIZES_BINDING, this.sizesBuf);
    if (status) all.set(INLINE_STATUS_BINDING, { binding: INLINE_STATUS_BINDING, resource: status });
    put(INLINE_MAP_BINDING, a.expertMap?.buffers[0]);
    put(5, a.bias?.buffers[0]);
    put(GEMV_PARTIALS_BINDING, this.partials);
    put(TOKEN_INDEX_BINDING, a.tokenIndex?.buffers[0]);
    put(TOKEN_KS_BINDING, a.tokenKs?.buffers[0]);
    if (cfg.fusion) for (const e of fusionEntries(p, cfg.fusion, { buffer: this.fusionParams! }, a)) all.set(e.binding, e);
    const mainEntries = gemvBindings(cfg, 'main').map((b) => all.get(b)!);
    const mbg = eng.bindGroup(this.main, mainEntries);
    pass.setPipeline(this.main);
    pass.setBindGroup(0, mbg);
    // Direct dispatches bounded by the schedule's tile count (scheduleGrid says why not indirect).
    // The in-kernel schedule needs a workgroup even without tiles: its designated one validates and reports.
    const main = scheduleGrid(plan.colTiles * cfg.kSplit, this.tiles());
    if (main[0] && main[1]) pass.dispatchWorkgroups(...main);
    eng.keepAlive(mbg, grouping, ...mainEntries);
    return all;
  }

  /** The split-K reduce pass, on the kg = 0 column of workgroups only. */
  private encodeReduce(pass: PassRecorder, all: Map<number, GPUBindGroupEntry>): void {
    const { eng, plan } = this;
    const rEntries = gemvBindings(plan.cfg, 'reduce').map((b) => all.get(b)!);
    const rbg = eng.bindGroup(this.reduce!, rEntries);
    pass.setPipeline(this.reduce!);
    pass.setBindGroup(0, rbg);
    const red = scheduleGrid(plan.colTiles, this.tiles());
    if (red[0] && red[1]) pass.dispatchWorkgroups(...red);
    eng.keepAlive(rbg, ...rEntries);
  }

  /** Schedule tiles the grid covers (at least one with the in-kernel schedule: its designated workgroup reports). */
  private tiles(): number {
    const { p, plan } = this;
    if (plan.cfg.dense) return Math.ceil(p.M / plan.cfg.rows);
    return Math.max(plan.cfg.inline ? 1 : 0, scheduleTileBound(p.M, p.G + (p.moe.zeroFill ? 2 : 0), plan.cfg.rows));
  }

  destroy(): void {
    this.eng.retire(this.params, this.schedParams, this.schedBuf, this.sizesBuf, this.partials, this.fusionParams, this.firstBuf);
  }
}
