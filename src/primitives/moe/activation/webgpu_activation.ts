import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { Executor } from '../../../runtime/lifetime.js';
import { ACT_WG, ACT_Y_FOLD, activationKey, activationWgsl } from '../../../kernels/wgsl/moe_activation.js';
import { groupedScheduleKey, groupedScheduleWgsl, PLAIN_SCHEDULE, SCHED_HEADER_WORDS, SCHED_PARAMS_BYTES } from '../../../kernels/wgsl/grouped_schedule.js';
import type { Grouping, OffsetsArg } from '../../matmul/runtime_offsets.js';
import { bwdOffsetsError } from '../../matmul_backward/runtime_offsets.js';
import type { ActivationProblem } from './pd.js';

export interface GpuActivationArgs {
  readonly src: GpuMemory;
  readonly dst: GpuMemory;
}

export interface GpuActivationImpl {
  readonly name: string;
  reject(p: ActivationProblem, engine: GpuEngine): string | undefined;
  task(p: ActivationProblem, engine: GpuEngine): Executor<GpuActivationArgs>;
}

const FN = 'moe.activation.execute';

/** What the device's offsets verdicts call the arguments: the cpu engine's names (impls.ts `rowsGrouping`). */
function offsetsNames(p: ActivationProblem, G: number): Grouping {
  const named = (name: string): OffsetsArg => ({ name, handle: 0, view: new Int32Array(0) });
  return { primary: named('ARG.SRC'), others: p.dst.isGrouped ? [named('ARG.DST')] : [], G, total: p.rows, variableDim: 0, sizes: undefined };
}

/**
 * WebGPU GLU stage: one invocation per output, the fused GEMM epilogue's GLU WGSL (moe_activation.ts).
 * A grouped src's offsets go first through the grouped matmul's `grouped-schedule` pass in its kMode (no
 * tile table): the cpu engine's rules, order and messages (offsets[0] = 0, non-decreasing, offsets[G] <=
 * rows, host-known sizes, a grouped dst's own offsets equal to src's), reported at `stream.wait()`; the
 * activation kernel then reads the verdict and the validated offsets[G] from the schedule buffer.
 */
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
    const uni = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    const params = eng.createBuffer(32, 'moe.activation params', uni);
    const G = p.grouped ? p.src.grouped!.groupCount : 0;
    const check = p.grouped ? {
      pipe: eng.pipeline(groupedScheduleKey(PLAIN_SCHEDULE), () => groupedScheduleWgsl(PLAIN_SCHEDULE)),
      params: eng.createBuffer(SCHED_PARAMS_BYTES, 'moe.activation offsets check params', uni),
      sched: eng.createBuffer(4 * (SCHED_HEADER_WORDS + G + 1), 'moe.activation validated offsets'),
      sizes: p.src.grouped!.groupSizes ?? p.dst.grouped?.groupSizes,
      sizesBuf: eng.createBuffer(4 * Math.max(1, G), 'moe.activation group sizes'),
      names: offsetsNames(p, G),
    } : undefined;
    if (check?.sizes) eng.write(check.sizesBuf, 0, Int32Array.from(check.sizes));
    return {
      destroy: () => eng.retire(params, check?.params, check?.sched, check?.sizesBuf),
      run: (a) => () => {
        eng.checkAlive();
        // A grouped src reports bad offsets even when no row could be written (the cpu checks them first too).
        if (!check && (p.rows === 0 || p.I === 0)) return;
        const slot = check && eng.status.take((code, i, x, y) => bwdOffsetsError(FN, check.names, code, i, x, y));
        const other = check && p.dst.isGrouped && a.dst.buffers[1] !== a.src.buffers[1] ? a.dst.buffers[1] : undefined;
        if (check && slot) {
          // grouped_schedule.ts params: G, total, tm, tilesN, slot, hasOther, kMode, tilesM, hasSizes (the rest 0).
          const sp = new Uint32Array(SCHED_PARAMS_BYTES / 4);
          sp.set([G, p.rows, 1, 0, slot.word, other ? 1 : 0, 1, 0, check.sizes ? 1 : 0]);
          eng.writeParams(check.params, sp);
        }
        eng.writeParams(params, Uint32Array.of(2 * p.I, p.I, p.rows, p.src.strides[0], p.dst.strides[0], G, 0, 0));
        eng.computePass('moe.activation', (pass) => {
          const entries: GPUBindGroupEntry[] = [
            { binding: 0, resource: { buffer: params } },
            { binding: 1, resource: { buffer: a.src.buffers[0] } },
            { binding: 2, resource: { buffer: a.dst.buffers[0] } },
          ];
          if (check && slot) {
            const checkEntries: GPUBindGroupEntry[] = [
              { binding: 0, resource: { buffer: check.params } },
              { binding: 1, resource: { buffer: a.src.buffers[1] } },
              { binding: 2, resource: { buffer: other ?? a.src.buffers[1] } },
              { binding: 3, resource: { buffer: check.sizesBuf } },
              { binding: 4, resource: { buffer: check.sched } },
              { binding: 5, resource: slot.binding },
            ];
            const cbg = eng.bindGroup(check.pipe, checkEntries);
            pass.setPipeline(check.pipe);
            pass.setBindGroup(0, cbg);
            pass.dispatchWorkgroups(1);
            eng.keepAlive(cbg, ...checkEntries);
            entries.push({ binding: 3, resource: { buffer: check.sched } });
          }
          const bg = eng.bindGroup(pipe, entries);
          pass.setPipeline(pipe);
          pass.setBindGroup(0, bg);
          pass.dispatchWorkgroups(Math.max(1, Math.ceil(p.I / ACT_WG)), Math.max(1, Math.min(p.rows, ACT_Y_FOLD)), Math.max(1, Math.ceil(p.rows / ACT_Y_FOLD)));
          eng.keepAlive(bg, ...entries);
        });
      },
    };
  },
};
