import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import { GEMV_PARTIALS_BINDING, gemvSplitKKey, gemvSplitKReduceWgsl, gemvSplitKWgsl } from '../../kernels/wgsl/gemm_splitk_gemv.js';
import { groupedScheduleKey, groupedScheduleWgsl, PLAIN_SCHEDULE, SCHED_PARAMS_BYTES, scheduleGrid, scheduleTileBound, scheduleWords } from '../../kernels/wgsl/grouped_schedule.js';
import { WGSL_ELTWISE_HELPERS } from '../../kernels/wgsl/wgsl_eltwise.js';
import type { MatmulArgs, MatmulExecutor } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { offsetsError, type Grouping } from './runtime_offsets.js';
import { fusionEntries, fusionUniform } from './webgpu_fusion.js';
import type { GemvPlan } from './webgpu_kernel_choice.js';

/** Where a grouped execution's offsets live on the device (webgpu_matmul.ts deviceGrouping). */
export type DeviceGrouping = { primary: GPUBuffer; other: GPUBuffer | undefined; names: Grouping };

/**
 * The decode executor of the gpu matmul (grouped M, few rows per group): the device schedule
 * (grouped_schedule.ts, TM = the plan's rows) then `gemv-splitk`, and with K split across
 * workgroups its reduce pass, all in one compute pass of the engine's open encoder.
 */
export class WebgpuGemvExecutor implements MatmulExecutor<GpuMemory> {
  private readonly main: GPUComputePipeline;
  private readonly reduce: GPUComputePipeline | undefined;
  private readonly sched: GPUComputePipeline;
  private readonly params: GPUBuffer;
  private readonly schedParams: GPUBuffer;
  private readonly schedBuf: GPUBuffer;
  private readonly sizesBuf: GPUBuffer;
  private readonly partials: GPUBuffer | undefined;
  private readonly fusionParams: GPUBuffer | undefined;
  private readonly sizes: readonly number[] | undefined;

  constructor(
    private readonly p: MatmulProblem,
    private readonly eng: GpuEngine,
    private readonly plan: GemvPlan,
    /** The 16 gemm-tiled params of `p` (webgpu_matmul.ts gemmParams); words 13..15 are set here. */
    params: Uint32Array,
    private readonly grouping: (a: MatmulArgs<GpuMemory>) => DeviceGrouping,
  ) {
    const cfg = plan.cfg;
    this.main = eng.pipeline(gemvSplitKKey(cfg, 'main'), () => WGSL_ELTWISE_HELPERS + gemvSplitKWgsl(cfg));
    if (cfg.kSplit > 1) {
      this.reduce = eng.pipeline(gemvSplitKKey(cfg, 'reduce'), () => WGSL_ELTWISE_HELPERS + gemvSplitKReduceWgsl(cfg));
      this.partials = eng.createBuffer(cfg.kSplit * p.M * p.N * 4, 'matmul split-K partial sums');
    }
    const uni = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    const P = Uint32Array.from(params);
    P[13] = plan.colTiles;
    P[14] = cfg.kSplit;
    P[15] = plan.kChunk;
    this.params = eng.createBuffer(64, 'matmul params', uni);
    eng.write(this.params, 0, P.buffer as ArrayBuffer);
    if (cfg.fusion) {
      const words = fusionUniform(p, cfg.fusion);
      this.fusionParams = eng.createBuffer(words.byteLength, 'matmul fusion params', uni);
      eng.write(this.fusionParams, 0, words.buffer as ArrayBuffer);
    }
    this.sched = eng.pipeline(groupedScheduleKey(PLAIN_SCHEDULE), () => groupedScheduleWgsl(PLAIN_SCHEDULE));
    this.schedParams = eng.createBuffer(SCHED_PARAMS_BYTES, 'matmul schedule params', uni);
    this.schedBuf = eng.createBuffer(scheduleWords(p.M, p.G, cfg.rows) * 4, 'matmul schedule', GPUBufferUsage.STORAGE | GPUBufferUsage.INDIRECT);
    this.sizes = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
    this.sizesBuf = eng.createBuffer(4 * (this.sizes?.length ?? 1), 'matmul group sizes');
    if (this.sizes) eng.write(this.sizesBuf, 0, Int32Array.from(this.sizes));
  }

  task(a: MatmulArgs<GpuMemory>): StreamTask {
    return () => this.record(a);
  }

  private record(a: MatmulArgs<GpuMemory>): void {
    const { p, eng } = this;
    eng.checkAlive();
    const grouping = this.grouping(a);
    const slot = eng.status.take((code, i, x, y) => offsetsError(grouping.names, code, i, x, y, grouping.names.others[0]?.name));
    const sp = new Uint32Array(SCHED_PARAMS_BYTES / 4);
    // The schedule writes x = column tiles x K splits into the indirect arguments.
    sp.set([p.G, p.M, this.plan.cfg.rows, this.plan.colTiles * this.plan.cfg.kSplit, slot.word, grouping.other ? 1 : 0, 0, 0, this.sizes ? 1 : 0, 0, p.moe.experts]);
    eng.writeParams(this.schedParams, sp);
    eng.encode('matmul', (enc) => this.encode(enc, a, grouping, slot.binding));
  }

  private encode(enc: GPUCommandEncoder, a: MatmulArgs<GpuMemory>, grouping: DeviceGrouping, status: GPUBufferBinding): void {
    const { p, eng, plan } = this;
    const split = plan.cfg.kSplit > 1;
    const pass = enc.beginComputePass({ label: 'matmul' });
    const sbg = eng.bindGroup(this.sched, [
        { binding: 0, resource: { buffer: this.schedParams } },
        { binding: 1, resource: { buffer: grouping.primary } },
        { binding: 2, resource: { buffer: grouping.other ?? grouping.primary } },
        { binding: 3, resource: { buffer: this.sizesBuf } },
        { binding: 4, resource: { buffer: this.schedBuf } },
        { binding: 5, resource: status },
      ]);
    pass.setPipeline(this.sched);
    pass.setBindGroup(0, sbg);
    pass.dispatchWorkgroups(1);
    // Each pipeline's auto layout holds only the bindings its entry point uses.
    const out: GPUBindGroupEntry[] = [{ binding: 3, resource: { buffer: a.dst.buffers[0] } }];
    if (a.bias) out.push({ binding: 5, resource: { buffer: a.bias.buffers[0] } });
    const part: GPUBindGroupEntry[] = split ? [{ binding: GEMV_PARTIALS_BINDING, resource: { buffer: this.partials! } }] : [];
    const mainEntries: GPUBindGroupEntry[] = [
      { binding: 0, resource: { buffer: this.params } },
      { binding: 1, resource: { buffer: a.src.buffers[0] } },
      { binding: 2, resource: { buffer: a.weights.buffers[0] } },
      { binding: 4, resource: { buffer: this.schedBuf } },
      ...(split ? part : out),
    ];
    if (plan.cfg.fusion) mainEntries.push(...fusionEntries(p, plan.cfg.fusion, this.fusionParams!, a));
    const mbg = eng.bindGroup(this.main, mainEntries);
    pass.setPipeline(this.main);
    pass.setBindGroup(0, mbg);
    // Direct dispatches bounded by the schedule's tile count (scheduleGrid says why not indirect).
    const tiles = scheduleTileBound(p.M, p.G, plan.cfg.rows);
    const main = scheduleGrid(plan.colTiles * plan.cfg.kSplit, tiles);
    if (main[0] && main[1]) pass.dispatchWorkgroups(...main);
    eng.keepAlive(sbg, mbg, grouping, ...mainEntries);
    if (this.reduce) {
      const rEntries: GPUBindGroupEntry[] = [
        { binding: 0, resource: { buffer: this.params } },
        { binding: 4, resource: { buffer: this.schedBuf } },
        ...out, ...part,
      ];
      const rbg = eng.bindGroup(this.reduce, rEntries);
      pass.setPipeline(this.reduce);
      pass.setBindGroup(0, rbg);
      // The reduce runs on the kg = 0 column of workgroups only.
      const red = scheduleGrid(plan.colTiles, tiles);
      if (red[0] && red[1]) pass.dispatchWorkgroups(...red);
      eng.keepAlive(rbg, ...rEntries);
    }
    pass.end();
    eng.keepAlive(pass);
  }

  destroy(): void {
    this.eng.retire(this.params, this.schedParams, this.schedBuf, this.sizesBuf, this.partials, this.fusionParams);
  }
}
