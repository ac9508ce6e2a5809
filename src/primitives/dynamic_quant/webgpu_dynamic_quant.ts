import { DnnlError } from '../../common/status.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { Executor } from '../../runtime/lifetime.js';
import { QROWS_ERR_NONFINITE, QROWS_ERR_OFFS, QROWS_FOLD, quantRowsWgsl, quantRowsWorkgroup } from '../../kernels/wgsl/quant_rows.js';
import type { DynamicQuantProblem } from './pd.js';
import { nonFinite, offsError } from './errors.js';

export interface GpuDynamicQuantArgs {
  readonly src: GpuMemory;
  readonly dst: GpuMemory;
  readonly scales: GpuMemory;
}

/** The errors the kernel reports, as the caller words them (a matmul's `:dq` names its own src). */
export interface QuantRowsErrors {
  offsets(G: number, n: number, rows: number): DnnlError;
  nonFinite(row: number): DnnlError;
}

export interface GpuDynamicQuantImpl {
  readonly name: string;
  reject(p: DynamicQuantProblem, engine: GpuEngine): string | undefined;
  task(p: DynamicQuantProblem, engine: GpuEngine, errors?: QuantRowsErrors): Executor<GpuDynamicQuantArgs>;
}

/** WebGPU per-row int8 quantization: one workgroup per row, integer arithmetic on the bits (quant_rows.ts). */
export const webgpuDynamicQuant: GpuDynamicQuantImpl = {
  name: 'webgpu:quant-rows-s8',
  reject: (p, eng) => {
    const limit = eng.caps.maxStorageBufferBindingSize;
    const bytes = Math.max(p.src.getSize(0), p.dst.getSize(0));
    if (bytes > limit) return `src or dst (${bytes} bytes) exceed the device's maxStorageBufferBindingSize ${limit}`;
    if (p.rows * p.src.strides[0] > 0x7fffffff || p.rows * p.dst.strides[0] > 0x7fffffff) return 'too large for 32-bit indexing';
    return undefined;
  },
  task: (p, eng, errors = { offsets: offsError, nonFinite }) => {
    const dt = p.src.dataType as 'f32' | 'bf16' | 'f16';
    const wg = quantRowsWorkgroup(p.cols);
    const pipe = eng.pipeline(`quant-rows-s8:${dt}:${p.grouped ? 'grouped' : 'plain'}:${wg}`, () => quantRowsWgsl(dt, p.grouped, wg));
    const params = eng.createBuffer(32, 'dynamic_quant params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    const G = p.grouped ? p.src.grouped!.groupCount : 0;
    return {
      destroy: () => eng.retire(params),
      run: (a) => () => {
        eng.checkAlive();
        if (!p.grouped && p.rows === 0) return;
        const slot = eng.status.take((code, i, x, y) => (code === QROWS_ERR_OFFS ? errors.offsets(i, x, y) : code === QROWS_ERR_NONFINITE ? errors.nonFinite(~i) : new DnnlError('runtime_error', `dynamic_quant: kernel status ${code}`)));
        eng.writeParams(params, Uint32Array.of(p.rows, p.cols, p.src.strides[0], p.dst.strides[0], G, slot.word, 0, 0));
        eng.encode('dynamic_quant', (enc) => {
          const entries: GPUBindGroupEntry[] = [
            { binding: 0, resource: { buffer: params } },
            { binding: 1, resource: { buffer: a.src.buffers[0] } },
            { binding: 2, resource: { buffer: a.dst.buffers[0] } },
            { binding: 3, resource: { buffer: a.scales.buffers[0] } },
            { binding: 4, resource: slot.binding },
          ];
          if (p.grouped) entries.push({ binding: 5, resource: { buffer: a.src.buffers[1] } });
          const bg = eng.bindGroup(pipe, entries);
          const pass = enc.beginComputePass({ label: 'dynamic_quant' });
          pass.setPipeline(pipe);
          pass.setBindGroup(0, bg);
          // At least one workgroup: with grouped src, workgroup 0 reports bad offsets.
          pass.dispatchWorkgroups(Math.max(1, Math.min(p.rows, QROWS_FOLD)), Math.max(1, Math.ceil(p.rows / QROWS_FOLD)));
          pass.end();
          eng.keepAlive(pass, bg, ...entries);
        });
      },
    };
  },
};
