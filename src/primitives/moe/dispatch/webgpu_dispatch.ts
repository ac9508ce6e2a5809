import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import { workgroupGrid } from '../../../runtime/gpu/grid.js';
import { fits32 } from '../../../kernels/fused_job.js';
import {
  DISPATCH_BLOCK, dispatchCopyWgsl, dispatchFusedWgsl, dispatchPlaceWgsl, dispatchReportWgsl, dispatchScanWgsl, dispatchScratchWords, dispatchWriteWgsl,
} from '../../../kernels/wgsl/moe_dispatch.js';
import type { DispatchArgs, GpuDispatchImpl } from './impls.js';
import { dispatchError } from './impls.js';
import type { DispatchProblem } from './pd.js';

/** Invocations per workgroup of the write pass (the place pass has DISPATCH_BLOCK). */
const WG = 256;

const is16 = (p: DispatchProblem): boolean => p.hidden !== undefined && p.hidden.dataType !== 'f32';

/** The five passes of kernels/wgsl/moe_dispatch.ts (one at decode sizes) in the batch's compute pass; nothing is read back by the host. */
class WebgpuDispatchExecutor {
  private readonly place: GPUComputePipeline;
  private readonly scan: GPUComputePipeline;
  private readonly write: GPUComputePipeline;
  private readonly copy: GPUComputePipeline | undefined;
  private readonly report: GPUComputePipeline;
  /** One block of slots and no hidden copy: the passes in one single-workgroup dispatch. */
  private readonly fused: GPUComputePipeline | undefined;
  private readonly params: GPUBuffer;
  private readonly scratch: GPUBuffer;
  private readonly args: GPUBuffer;
  private readonly n: number;

  constructor(private readonly p: DispatchProblem, private readonly eng: GpuEngine) {
    this.n = p.T * p.k;
    this.place = eng.pipeline('moe-dispatch-place', dispatchPlaceWgsl);
    this.scan = eng.pipeline('moe-dispatch-scan', dispatchScanWgsl);
    this.write = eng.pipeline('moe-dispatch-write', dispatchWriteWgsl);
    this.report = eng.pipeline('moe-dispatch-report', dispatchReportWgsl);
    if (!p.hidden && this.n <= DISPATCH_BLOCK) this.fused = eng.pipeline('moe-dispatch-fused', dispatchFusedWgsl);
    if (p.hidden) this.copy = eng.pipeline(`moe-dispatch-copy-${is16(p) ? 16 : 32}`, () => dispatchCopyWgsl(is16(p)));
    this.params = eng.createBuffer(64, 'moe.dispatch params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    this.scratch = eng.createBuffer(4 * dispatchScratchWords(this.n, p.G), 'moe.dispatch scratch');
    this.args = eng.createBuffer(16, 'moe.dispatch copy args', GPUBufferUsage.STORAGE | GPUBufferUsage.INDIRECT);
  }

  run(a: DispatchArgs<GpuMemory>): () => void {
    return () => this.record(a);
  }

  private record(a: DispatchArgs<GpuMemory>): void {
    const { p, eng, n } = this;
    eng.checkAlive();
    const slot = eng.status.take((code, i, x, y) => dispatchError(p, code, i, x, y));
    const nb = Math.ceil(n / DISPATCH_BLOCK);
    eng.writeParams(this.params, Uint32Array.from([
      n, p.k, p.E, p.G, p.R, p.cap, p.block, p.batched ? 1 : 0, nb, slot.word, p.K, p.hidden ? p.hidden.strides[0] : 0,
      a.expertMap ? 1 : 0, eng.caps.maxComputeWorkgroupsPerDimension, is16(p) ? 1 : 0, 0,
    ]));
    // Offsets (contiguous: the grouped dst's offsets buffer, or the index-only dst) or the batched counts.
    const offsBuf = p.batched ? a.counts!.buffers[0] : a.hidden ? a.dst!.buffers[1] : a.dst!.buffers[0];
    eng.computePass('moe.dispatch', (pass) => {
      const buf = (binding: number, buffer: GPUBuffer): GPUBindGroupEntry => ({ binding, resource: { buffer } });
      const group = (pl: GPUComputePipeline, entries: GPUBindGroupEntry[]): GPUBindGroup => eng.bindGroup(pl, entries);
      const P = buf(0, this.params), ids = buf(1, a.ids.buffers[0]), map = buf(2, (a.expertMap ?? a.ids).buffers[0]), scr = buf(3, this.scratch);
      const outs = [buf(5, a.rowOf.buffers[0]), buf(6, a.tokenIndex.buffers[0]), buf(7, a.tokenKs.buffers[0]), buf(8, offsBuf)];
      if (this.fused) {
        const fg = group(this.fused, [P, ids, map, scr, ...outs, { binding: 11, resource: slot.binding }]);
        pass.setPipeline(this.fused);
        pass.setBindGroup(0, fg);
        pass.dispatchWorkgroups(1);
        eng.keepAlive(fg);
        return;
      }
      const groups = [
        group(this.place, [P, ids, map, scr]),
        group(this.scan, [P, scr, buf(4, this.args)]),
        group(this.write, [P, scr, ...outs]),
        group(this.report, [P, ids, map, scr, { binding: 11, resource: slot.binding }]),
      ];
      const copyGroup = this.copy && a.hidden && a.dst ? group(this.copy, [P, scr, buf(6, a.tokenIndex.buffers[0]), buf(9, a.hidden.buffers[0]), buf(10, a.dst.buffers[0])]) : undefined;
      const dispatch = (pl: GPUComputePipeline, bg: GPUBindGroup, [x, y]: [number, number]): void => {
        if (x === 0) return;
        pass.setPipeline(pl);
        pass.setBindGroup(0, bg);
        pass.dispatchWorkgroups(x, y);
      };
      dispatch(this.place, groups[0], workgroupGrid(eng, Math.max(n, a.expertMap ? p.E : 0), DISPATCH_BLOCK));
      dispatch(this.scan, groups[1], [1, 1]);
      dispatch(this.write, groups[2], workgroupGrid(eng, Math.max(n, p.R, p.G + 1), WG));
      if (this.copy && copyGroup) {
        pass.setPipeline(this.copy);
        pass.setBindGroup(0, copyGroup);
        pass.dispatchWorkgroupsIndirect(this.args, 0);
      }
      // Also zeroes the scratch words the next execution's place pass adds to (moe_dispatch.ts).
      dispatch(this.report, groups[3], [1, 1]);
      eng.keepAlive(...groups, copyGroup);
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
    const bytes = [p.hidden?.getSize(0) ?? 0, p.dst?.getSize(0) ?? 0, 4 * dispatchScratchWords(p.T * p.k, p.G), 4 * p.R];
    if (bytes.some((b) => b > limit)) return `a binding exceeds the device's maxStorageBufferBindingSize ${limit}`;
    return undefined;
  },
  task: (p, eng) => new WebgpuDispatchExecutor(p, eng),
};
