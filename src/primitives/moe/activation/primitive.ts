import type { Stream } from '../../../runtime/stream.js';
import type { Executor } from '../../../runtime/lifetime.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, type ExecArgs } from '../../exec_args.js';
import { gpuCheckNoOverlap, gpuMemArg, type AnyExecArgs } from '../../gpu_exec_args.js';
import type { ActivationArgs, ActivationImpl } from './impls.js';
import type { GpuActivationArgs, GpuActivationImpl } from './webgpu_activation.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.activation.execute';

/** `new moe.activation.Primitive(pd).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act })`. */
export class Primitive extends OpPrimitive<PrimitiveDesc, ActivationArgs | GpuActivationArgs> {
  constructor(pd: PrimitiveDesc) {
    const eng = pd.engine;
    // Each engine kind's executor only ever sees its own memory kind (the argument checks see to it).
    const exec = eng.kind === 'gpu' ? (pd.impl as GpuActivationImpl).task(pd.problem, eng) : (pd.impl as ActivationImpl).task(pd.problem, eng);
    super(pd, exec as Executor<ActivationArgs | GpuActivationArgs>);
  }

  execute(stream: Stream, args: ExecArgs | AnyExecArgs): void {
    const pd = this.pd, eng = pd.engine;
    this.begin(FN, stream);
    if (eng.kind === 'gpu') {
      const a: GpuActivationArgs = { src: gpuMemArg(FN, eng, args, ARG.SRC, pd.problem.src), dst: gpuMemArg(FN, eng, args, ARG.DST, pd.problem.dst) };
      gpuCheckNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC]]);
      this.enqueue(stream, a);
      return;
    }
    const cpu = args as ExecArgs;
    const a: ActivationArgs = { src: memArg(FN, eng, cpu, ARG.SRC, pd.problem.src), dst: memArg(FN, eng, cpu, ARG.DST, pd.problem.dst) };
    checkNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC]]);
    this.enqueue(stream, a);
  }
}
