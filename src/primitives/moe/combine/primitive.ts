import type { Stream } from '../../../runtime/stream.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../../exec_args.js';
import { combineImplList, type CombineArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.combine.execute';

/** `new moe.combine.Primitive(pd).execute(strm, { [ARG.SRC], [ARG.MOE_ROW_OF], [ARG.MOE_TOPK_WEIGHTS]?, [ARG.DST] })`. */
export class Primitive extends OpPrimitive<PrimitiveDesc, CombineArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, combineImplList.find((i) => i.reject(pd.problem, pd.engine) === undefined)!.task(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const p = this.pd.problem, eng = this.pd.engine;
    this.begin(FN, stream);
    if (!p.weights) noArg(FN, args, ARG.MOE_TOPK_WEIGHTS, 'the pd is not weighted');
    const a: CombineArgs = {
      src: memArg(FN, eng, args, ARG.SRC, p.src),
      rowOf: memArg(FN, eng, args, ARG.MOE_ROW_OF, p.rowOf),
      weights: p.weights ? memArg(FN, eng, args, ARG.MOE_TOPK_WEIGHTS, p.weights) : undefined,
      dst: memArg(FN, eng, args, ARG.DST, p.dst),
    };
    checkNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC], [a.rowOf, ARG.MOE_ROW_OF], [a.weights, ARG.MOE_TOPK_WEIGHTS]]);
    this.enqueue(stream, a);
  }
}
