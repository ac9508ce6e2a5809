import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import { workgroupGrid } from '../../../runtime/gpu/grid.js';
import { fits32 } from '../../../kernels/fused_job.js';
import {
  DISPATCH_BLOCK, dispatchCopyWgsl, dispatchPlaceWgsl, dispatchReportWgsl, dispatchScanWgsl, dispatchScratchWords, dispatchWriteWgsl,
} from '../../../kernels/wgsl/moe_dispatch.js';
import {
  DISPATCH_GRID_MAX_BLOCKS, DISPATCH_GRID_MAX_G, DISPATCH_LOCAL_MAX_BLOCKS, DISPATCH_LOCAL_MAX_G, dispatchGridWgsl, dispatchLocalPlaceWgsl, dispatchLocalScratchWords, dispatchLocalWriteWgsl, dispatchOneWgsl,
} from '../../../kernels/wgsl/moe_dispatch_local.js';
import type { DispatchArgs, GpuDispatchImpl } from './impls.js';
import { dispatchError } from './impls.js';
import type { DispatchProblem } from './pd.js';

/** Invocations per workgroup of the write pass (the place pass has DISPATCH_BLOCK). */
const WG = 256;
/** The largest capacity grid the hidden copy is dispatched over directly (its empty workgroups return at once). */
const COPY_DIRECT_MAX_WORKGROUPS = 65536;

const is16 = (p: DispatchProblem): boolean => p.hidden !== undefined && p.hidden.dataType !== 'f32';

/**
 * Which kernels place the slots: `one` (moe_dispatch_local.ts, one workgroup: decode without hidden),
 * `grid` (one pass, every workgroup counts every slot: up to 32 blocks), `two` (place + write),
 * `four` (moe_dispatch.ts, storage scratch: many local experts or blocks); the hidden copy follows
 * all but `one`. H200, MoE-B int4 layer: the previous one-workgroup kernel took 22 us at T = 1 (41 at
 * T = 4), the four passes 48 us at T = 256; `one` 10 us (14), `grid` 26 us, `two` 32 us
 * (reports/layer-decode-h200.md).
 */
export type DispatchForm = 'one' | 'grid' | 'two' | 'four';

/** @internal the form a problem takes (tests check each one runs). */
export function formOf(p: DispatchProblem): DispatchForm {
  const n = p.T * p.k;
  if (p.G > DISPATCH_LOCAL_MAX_G || Math.ceil(n / DISPATCH_BLOCK) > DISPATCH_LOCAL_MAX_BLOCKS) return 'four';
  if (!p.hidden && n <= DISPATCH_BLOCK) return 'one';
  return p.G <= DISPATCH_GRID_MAX_G && Math.ceil(n / DISPATCH_BLOCK) <= DISPATCH_GRID_MAX_BLOCKS ? 'grid' : 'two';
}

/** Place workgroups of the `two` form: blocks of slots, or of map entries where there are more of those. */
const placeBlocks = (p: DispatchProblem): number => Math.ceil(Math.max(p.T * p.k, p.expertMap ? p.E : 0) / DISPATCH_BLOCK);

function scratchWords(p: DispatchProblem): number {
  const form = formOf(p), n = p.T * p.k;
  return form === 'four' ? dispatchScratchWords(n, p.G) : form === 'two' ? dispatchLocalScratchWords(n, p.G, placeBlocks(p)) : 4;
}

/** @internal the dispatch kernels' uniform (moe_dispatch.ts DISPATCH_COMMON) for one execution. */
export function dispatchParams(p: DispatchProblem, eng: GpuEngine, hasMap: boolean, slotWord: number): Uint32Array<ArrayBuffer> {
  const n = p.T * p.k;
  return Uint32Array.from([
    n, p.k, p.E, p.G, p.R, p.cap, p.block, p.batched ? 1 : 0, Math.ceil(n / DISPATCH_BLOCK), slotWord, p.K, p.hidden ? p.hidden.strides[0] : 0,
    hasMap ? 1 : 0, eng.caps.maxComputeWorkgroupsPerDimension, is16(p) ? 1 : 0, formOf(p) === 'two' ? placeBlocks(p) : 0,
  ]);
}

/** The passes of the problem's form in the batch's compute pass; nothing is read back by the host. */
class WebgpuDispatchExecutor {
  private readonly form: DispatchForm;
  /** `one`, `grid`: the kernel; `two`: place, write; `four`: place, scan, write, report. */
  private readonly pipelines: GPUComputePipeline[];
  private readonly copy: GPUComputePipeline | undefined;
  private readonly params: GPUBuffer;
  private readonly scratch: GPUBuffer;
  private readonly args: GPUBuffer;
  private readonly n: number;

  constructor(private readonly p: DispatchProblem, private readonly eng: GpuEngine) {
    this.n = p.T * p.k;
    this.form = formOf(p);
    this.pipelines = this.form === 'one' ? [eng.pipeline('moe-dispatch-one', dispatchOneWgsl)]
      : this.form === 'grid' ? [eng.pipeline('moe-dispatch-grid', dispatchGridWgsl)]
      : this.form === 'two' ? [eng.pipeline('moe-dispatch-local-place', dispatchLocalPlaceWgsl), eng.pipeline('moe-dispatch-local-write', dispatchLocalWriteWgsl)]
        : [eng.pipeline('moe-dispatch-place', dispatchPlaceWgsl), eng.pipeline('moe-dispatch-scan', dispatchScanWgsl), eng.pipeline('moe-dispatch-write', dispatchWriteWgsl), eng.pipeline('moe-dispatch-report', dispatchReportWgsl)];
    if (p.hidden) this.copy = eng.pipeline(`moe-dispatch-copy-${is16(p) ? 16 : 32}`, () => dispatchCopyWgsl(is16(p)));
    this.params = eng.createBuffer(64, 'moe.dispatch params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    this.scratch = eng.createBuffer(4 * scratchWords(p), 'moe.dispatch scratch');
    this.args = eng.createBuffer(16, 'moe.dispatch copy args', GPUBufferUsage.STORAGE | GPUBufferUsage.INDIRECT);
  }

  run(a: DispatchArgs<GpuMemory>): () => void {
    return () => this.record(a);
  }

  private record(a: DispatchArgs<GpuMemory>): void {
    const { p, eng, n, form } = this;
    eng.checkAlive();
    const slot = eng.status.take((code, i, x, y) => dispatchError(p, code, i, x, y));
    eng.writeParams(this.params, dispatchParams(p, eng, a.expertMap !== undefined, slot.word));
    // Offsets (contiguous: the grouped dst's offsets buffer, or the index-only dst) or the batched counts.
    const offsBuf = p.batched ? a.counts!.buffers[0] : a.hidden ? a.dst!.buffers[1] : a.dst!.buffers[0];
    eng.computePass('moe.dispatch', (pass) => {
      const buf = (binding: number, buffer: GPUBuffer): GPUBindGroupEntry => ({ binding, resource: { buffer } });
      const group = (pl: GPUComputePipeline, entries: GPUBindGroupEntry[]): GPUBindGroup => eng.bindGroup(pl, entries);
      const P = buf(0, this.params), ids = buf(1, a.ids.buffers[0]), map = buf(2, (a.expertMap ?? a.ids).buffers[0]), scr = buf(3, this.scratch);
      const args = buf(4, this.args), status = { binding: 11, resource: slot.binding };
      const outs = [buf(5, a.rowOf.buffers[0]), buf(6, a.tokenIndex.buffers[0]), buf(7, a.tokenKs.buffers[0]), buf(8, offsBuf)];
      const pl = this.pipelines;
      const dispatch = (i: number, entries: GPUBindGroupEntry[], [x, y]: [number, number]): void => {
        if (x === 0) return;
        const bg = group(pl[i], entries);
        pass.setPipeline(pl[i]);
        pass.setBindGroup(0, bg);
        pass.dispatchWorkgroups(x, y);
        eng.keepAlive(bg);
      };
      const writeGrid = workgroupGrid(eng, Math.max(n, p.R, p.G + 1), WG);
      if (form === 'one') {
        dispatch(0, [P, ids, map, ...outs, status], [1, 1]);
      } else if (form === 'grid') {
        dispatch(0, [P, ids, map, scr, args, ...outs, status], writeGrid);
      } else if (form === 'two') {
        dispatch(0, [P, ids, map, scr], workgroupGrid(eng, placeBlocks(p) * DISPATCH_BLOCK, DISPATCH_BLOCK));
        dispatch(1, [P, ids, map, scr, args, ...outs, status], writeGrid);
      } else {
        dispatch(0, [P, ids, map, scr], workgroupGrid(eng, Math.max(n, a.expertMap ? p.E : 0), DISPATCH_BLOCK));
        dispatch(1, [P, scr, args], [1, 1]);
        dispatch(2, [P, scr, ...outs], writeGrid);
      }
      if (this.copy && a.hidden && a.dst) {
        const copyGroup = group(this.copy, [P, scr, args, buf(6, a.tokenIndex.buffers[0]), buf(9, a.hidden.buffers[0]), buf(10, a.dst.buffers[0])]);
        pass.setPipeline(this.copy);
        pass.setBindGroup(0, copyGroup);
        // Over the rows' capacity (host-known) where that is a modest grid: Dawn validates an indirect
        // dispatch with a compute pass of its own (0.7-1.1 ms each on an H100, reports/compare-gpu-h100-s15*.md).
        const words = is16(p) ? Math.ceil((p.R * p.K) / 2) : p.R * p.K;
        const [x, y] = workgroupGrid(eng, words, WG);
        if (x * y <= COPY_DIRECT_MAX_WORKGROUPS) {
          if (x > 0) pass.dispatchWorkgroups(x, y);
        } else pass.dispatchWorkgroupsIndirect(this.args, 0);
        eng.keepAlive(copyGroup);
      }
      // Also zeroes the scratch words the next execution's place pass adds to (moe_dispatch.ts).
      if (form === 'four') dispatch(3, [P, ids, map, scr, status], [1, 1]);
    });
  }

  destroy(): void {
    this.eng.retire(this.params, this.scratch, this.args);
  }
}

/** WebGPU dispatch: a stable counting sort on the device; the offsets land in the output memory for the GEMM that follows. */
export const webgpuDispatch: GpuDispatchImpl = {
  name: 'webgpu:moe-dispatch',
  describe: (_eng, p) => `webgpu:moe-dispatch-counting-sort${p.hidden ? '+permute' : ''}${p.batched ? ':batched' : ''}`,
  reject(p, eng) {
    const limit = eng.caps.maxStorageBufferBindingSize;
    if (p.R * Math.max(1, p.K) > 0x7fffffff || (p.hidden && !fits32(p.hidden))) return 'too large for 32-bit indexing';
    const bytes = [p.hidden?.getSize(0) ?? 0, p.dst?.getSize(0) ?? 0, 4 * scratchWords(p), 4 * p.R];
    if (bytes.some((b) => b > limit)) return `a binding exceeds the device's maxStorageBufferBindingSize ${limit}`;
    return undefined;
  },
  task: (p, eng) => new WebgpuDispatchExecutor(p, eng),
};
