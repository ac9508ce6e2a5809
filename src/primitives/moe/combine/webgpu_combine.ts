import { DnnlError } from '../../../common/status.js';
import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { Executor } from '../../../runtime/lifetime.js';
import { COMBINE_ERR_ROW, COMBINE_FUSED_CHECK, COMBINE_WG, COMBINE_Y_FOLD, combineCheckWgsl, combineVec4Fits, combineWgsl } from '../../../kernels/wgsl/moe_combine.js';
import type { CombineProblem } from './pd.js';
import { rowError } from './row_error.js';

export interface GpuCombineArgs {
  readonly src: GpuMemory;
  readonly rowOf: GpuMemory;
  readonly weights: GpuMemory | undefined;
  readonly dst: GpuMemory;
}

export interface GpuCombineImpl {
  readonly name: string;
  reject(p: CombineProblem, engine: GpuEngine): string | undefined;
  task(p: CombineProblem, engine: GpuEngine): Executor<GpuCombineArgs>;
}

/** Bytes a kernel binds of `md`'s values (the whole span). */
const bytesOf = (elems: number, dt: string): number => elems * (dt === 'f32' ? 4 : 2);

/**
 * WebGPU combine: a one-workgroup check of row_of (status slot), then the slot-ordered f32 sum per
 * (token, column) in the same pass, skipped as a whole when the check failed (moe_combine.ts).
 */
export const webgpuCombine: GpuCombineImpl = {
  name: 'webgpu:moe-combine',
  reject: (p, eng) => {
    const limit = eng.caps.maxStorageBufferBindingSize;
    const src = bytesOf(p.src.spanElems, 'f32'), dst = bytesOf(p.dst.spanElems, p.dst.dataType);
    if (Math.max(src, dst) > limit) return `src (${src} bytes) or dst (${dst} bytes) exceed the device's maxStorageBufferBindingSize ${limit}`;
    if (p.rows * p.srcLd > 0xffffffff || p.T * p.dst.strides[0] > 0xffffffff) return 'too large for 32-bit indexing';
    return undefined;
  },
  task: (p, eng) => {
    const dt = p.dst.dataType as 'f32' | 'bf16' | 'f16';
    // Decode sizes: the combine workgroups check row_of themselves (one dispatch, not two).
    const fused = p.T * p.k <= COMBINE_FUSED_CHECK;
    const check = fused ? undefined : eng.pipeline('moe-combine-check', combineCheckWgsl);
    const vec4 = combineVec4Fits(dt, p.N, p.srcLd, p.dst.strides[0]);
    const combine = eng.pipeline(`moe-combine:${dt}${fused ? ':checked' : ''}${vec4 ? ':vec4' : ''}`, () => combineWgsl(dt, fused, vec4));
    const colsPerGroup = COMBINE_WG * (vec4 ? 4 : 1);
    const params = eng.createBuffer(48, 'moe.combine params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    return {
      destroy: () => eng.retire(params),
      run: (a) => () => {
        eng.checkAlive();
        const n = p.T * p.k;
        if (n === 0) return;
        const slot = eng.status.take((code, i, x) => (code === COMBINE_ERR_ROW ? rowError(p, i, x) : new DnnlError('runtime_error', `moe.combine: kernel status ${code}`)));
        eng.writeParams(params, Uint32Array.of(p.T, p.k, p.N, p.srcLd, p.dst.strides[0], p.rows, p.scattered ? 1 : 0, p.weighted ? 1 : 0, slot.word, 0, 0, 0));
        eng.computePass('moe.combine', (pass) => {
          const ce: GPUBindGroupEntry[] = [
            { binding: 0, resource: { buffer: params } },
            { binding: 1, resource: { buffer: a.rowOf.buffers[0] } },
            { binding: 2, resource: slot.binding },
          ];
          const cbg = check && eng.bindGroup(check, ce);
          if (check && cbg) {
            pass.setPipeline(check);
            pass.setBindGroup(0, cbg);
            pass.dispatchWorkgroups(1);
          }
          const ke: GPUBindGroupEntry[] = [
            { binding: 0, resource: { buffer: params } },
            { binding: 1, resource: { buffer: a.src.buffers[0] } },
            { binding: 2, resource: { buffer: a.rowOf.buffers[0] } },
            // Unweighted: any read-only buffer fills the slot (the kernel never reads it).
            { binding: 3, resource: { buffer: (a.weights ?? a.rowOf).buffers[0] } },
            { binding: 4, resource: { buffer: a.dst.buffers[0] } },
            { binding: 5, resource: slot.binding },
          ];
          const kbg = eng.bindGroup(combine, ke);
          // With the check fused, at least one workgroup runs it (N = 0 included).
          if (p.N > 0 || !check) {
            pass.setPipeline(combine);
            pass.setBindGroup(0, kbg);
            pass.dispatchWorkgroups(Math.max(1, Math.ceil(p.N / colsPerGroup)), Math.min(p.T, COMBINE_Y_FOLD), Math.ceil(p.T / COMBINE_Y_FOLD));
          }
          eng.keepAlive(cbg, kbg, ...ce, ...ke);
        });
      },
    };
  },
};
