import type { Stream } from '../../runtime/stream.js';
import type { Executor } from '../../runtime/lifetime.js';
import { ARG } from '../args.js';
import { OpPrimitive } from '../op_primitive.js';
import { memArg, type ExecArgs } from '../exec_args.js';
import { gpuCheckNoOverlap, gpuMemArg, type AnyExecArgs } from '../gpu_exec_args.js';
import type { DynamicQuantArgs, DynamicQuantImpl } from './impls.js';
import type { GpuDynamicQuantArgs, GpuDynamicQuantImpl } from './webgpu_dynamic_quant.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'dynamic_quant.execute';

/** `execute(strm, { [ARG.SRC]: x, [ARG.DST]: q, [ARG.ATTR_SCALES | ARG.DST]: scales })`. */
export class Primitive extends OpPrimitive<PrimitiveDesc, DynamicQuantArgs | GpuDynamicQuantArgs> {
  constructor(pd: PrimitiveDesc) {
    const eng = pd.engine;
    // Each engine kind's executor only ever sees its own memory kind (the argument checks see to it).
    const exec = eng.kind === 'gpu' ? (pd.impl as GpuDynamicQuantImpl).task(pd.problem, eng) : (pd.impl as DynamicQuantImpl).task(pd.problem, eng);
    super(pd, exec as Executor<DynamicQuantArgs | GpuDynamicQuantArgs>);
  }

  execute(stream: Stream, args: ExecArgs | AnyExecArgs): void {
    this.begin(FN, stream);
    const p = this.pd.problem, eng = this.pd.engine;
    if (eng.kind === 'gpu') {
      const a: GpuDynamicQuantArgs = {
        src: gpuMemArg(FN, eng, args, ARG.SRC, p.src), dst: gpuMemArg(FN, eng, args, ARG.DST, p.dst), scales: gpuMemArg(FN, eng, args, ARG.ATTR_SCALES | ARG.DST, p.scales),
      };
      // WebGPU binds src read-only and dst / scales writable in one dispatch: they must be distinct buffers.
      gpuCheckNoOverlap(FN, [[a.dst, ARG.DST], [a.scales, ARG.ATTR_SCALES | ARG.DST]], [[a.src, ARG.SRC], [a.dst, ARG.DST], [a.scales, ARG.ATTR_SCALES | ARG.DST]]);
      this.enqueue(stream, a);
      return;
    }
    const cpu = args as ExecArgs;
    this.enqueue(stream, {
      src: memArg(FN, eng, cpu, ARG.SRC, p.src), dst: memArg(FN, eng, cpu, ARG.DST, p.dst), scales: memArg(FN, eng, cpu, ARG.ATTR_SCALES | ARG.DST, p.scales),
    });
  }
}
