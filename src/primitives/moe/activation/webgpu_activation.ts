import { DnnlError } from '../../../common/status.js';
import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { Executor } from '../../../runtime/lifetime.js';
import { ACT_ERR_OFFS, ACT_WG, ACT_Y_FOLD, activationKey, activationWgsl } from '../../../kernels/wgsl/moe_activation.js';
import type { ActivationProblem } from './pd.js';
import { offsError } from './offs_error.js';

export interface GpuActivationArgs {
  readonly src: GpuMemory;
  readonly dst: GpuMemory;
}

export interface GpuActivationImpl {
  readonly name: string;
  reject(p: ActivationProblem, engine: GpuEngine): string | undefined;
  task(p: ActivationProblem, engine: GpuEngine): Executor<GpuActivationArgs>;
}

/** WebGPU GLU stage: one invocation per output, the fused GEMM epilogue's GLU WGSL (moe_activation.ts). */
export const webgpuActivation: GpuActivationImpl = {
  name: 'webgpu:moe-activation',
  reject: (p, eng) => {
    const limit = eng.caps.maxStorageBufferBindingSize;
    const bytes = 4 * Math.max(p.src.spanElems, p.dst.spanElems);
    if (bytes > limit) return `src or dst (${bytes} bytes) exceed the device's maxStorageBufferBindingSize ${limit}`;
    if (p.rows * p.src.strides[0] > 0xffffffff) return 'too large for 32-bit indexing';
    return undefined;
  },
  task: (p, eng) => {
    const glu = { alg: p.alg, layout: p.layout, alpha: p.alpha, limit: p.limit };
    const pipe = eng.pipeline(activationKey(glu, p.grouped), () => activationWgsl(glu, p.grouped));
    const params = eng.createBuffer(32, 'moe.activation params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    const G = p.grouped ? p.src.grouped!.groupCount : 0;
    return {
      destroy: () => eng.retire(params),
      run: (a) => () => {
        eng.checkAlive();
        // A grouped src reports bad offsets even when no row could be written (the cpu checks them first too).
        if (!p.grouped && (p.rows === 0 || p.I === 0)) return;
        const slot = p.grouped ? eng.status.take((code, i, x, y) => (code === ACT_ERR_OFFS ? offsError(i, x, y) : new DnnlError('runtime_error', `moe.activation: kernel status ${code}`))) : undefined;
        eng.writeParams(params, Uint32Array.of(2 * p.I, p.I, p.rows, p.src.strides[0], p.dst.strides[0], G, slot?.word ?? 0, 0));
        eng.computePass('moe.activation', (pass) => {
          const entries: GPUBindGroupEntry[] = [
            { binding: 0, resource: { buffer: params } },
            { binding: 1, resource: { buffer: a.src.buffers[0] } },
            { binding: 2, resource: { buffer: a.dst.buffers[0] } },
          ];
          if (slot) entries.push({ binding: 3, resource: { buffer: a.src.buffers[1] } }, { binding: 4, resource: slot.binding });
          const bg = eng.bindGroup(pipe, entries);
          pass.setPipeline(pipe);
          pass.setBindGroup(0, bg);
          // At least one workgroup: with grouped src, workgroup 0 reports bad offsets.
          pass.dispatchWorkgroups(Math.max(1, Math.ceil(p.I / ACT_WG)), Math.max(1, Math.min(p.rows, ACT_Y_FOLD)), Math.max(1, Math.ceil(p.rows / ACT_Y_FOLD)));
          eng.keepAlive(bg, ...entries);
        });
      },
    };
  },
};
