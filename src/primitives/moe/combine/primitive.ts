import type { Stream } from '../../../runtime/stream.js';
import type { Executor } from '../../../runtime/lifetime.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../../exec_args.js';
import { gpuCheckNoOverlap, gpuMemArg, type AnyExecArgs } from '../../gpu_exec_args.js';
import type { CombineArgs, CombineImpl } from './impls.js';
import type { GpuCombineArgs, GpuCombineImpl } from './webgpu_combine.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.combine.execute';

/** `new moe.combine.Primitive(pd).execute(strm, { [ARG.SRC], [ARG.MOE_ROW_OF], [ARG.MOE_TOPK_WEIGHTS]?, [ARG.DST] })`. */
export class Primitive extends OpPrimitive<PrimitiveDesc, CombineArgs | GpuCombineArgs> {
  constructor(pd: PrimitiveDesc) {
    const eng = pd.engine;
    // Each engine kind's executor only ever sees its own memory kind (the argument checks see to it).
    const exec = eng.kind === 'gpu' ? (pd.impl as GpuCombineImpl).task(pd.problem, eng) : (pd.impl as CombineImpl).task(pd.problem, eng);
    super(pd, exec as Executor<CombineArgs | GpuCombineArgs>);
  }

  execute(stream: Stream, args: ExecArgs | AnyExecArgs): void {
    const p = this.pd.problem, eng = this.pd.engine;
    this.begin(FN, stream);
    if (!p.weights) noArg(FN, args as ExecArgs, ARG.MOE_TOPK_WEIGHTS, 'the pd is not weighted');
    if (eng.kind === 'gpu') {
      const a: GpuCombineArgs = {
        src: gpuMemArg(FN, eng, args, ARG.SRC, p.src),
        rowOf: gpuMemArg(FN, eng, args, ARG.MOE_ROW_OF, p.rowOf),
        weights: p.weights ? gpuMemArg(FN, eng, args, ARG.MOE_TOPK_WEIGHTS, p.weights) : undefined,
        dst: gpuMemArg(FN, eng, args, ARG.DST, p.dst),
      };
      gpuCheckNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC], [a.rowOf, ARG.MOE_ROW_OF], [a.weights, ARG.MOE_TOPK_WEIGHTS]]);
      this.enqueue(stream, a);
      return;
    }
    const cpu = args as ExecArgs;
    const a: CombineArgs = {
      src: memArg(FN, eng, cpu, ARG.SRC, p.src),
      rowOf: memArg(FN, eng, cpu, ARG.MOE_ROW_OF, p.rowOf),
      weights: p.weights ? memArg(FN, eng, cpu, ARG.MOE_TOPK_WEIGHTS, p.weights) : undefined,
      dst: memArg(FN, eng, cpu, ARG.DST, p.dst),
    };
    checkNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC], [a.rowOf, ARG.MOE_ROW_OF], [a.weights, ARG.MOE_TOPK_WEIGHTS]]);
    this.enqueue(stream, a);
  }
}
