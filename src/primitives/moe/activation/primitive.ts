import type { Stream } from '../../../runtime/stream.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, type ExecArgs } from '../../exec_args.js';
import type { ActivationArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.activation.execute';

/** `new moe.activation.Primitive(pd).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act })`. */
export class Primitive extends OpPrimitive<PrimitiveDesc, ActivationArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, pd.impl.task(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine;
    this.begin(FN, stream);
    const a: ActivationArgs = { src: memArg(FN, eng, args, ARG.SRC, pd.problem.src), dst: memArg(FN, eng, args, ARG.DST, pd.problem.dst) };
    checkNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC]]);
    this.enqueue(stream, a);
  }
}
