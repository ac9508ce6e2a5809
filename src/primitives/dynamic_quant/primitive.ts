import type { Stream } from '../../runtime/stream.js';
import { ARG } from '../args.js';
import { OpPrimitive } from '../op_primitive.js';
import { memArg, type ExecArgs } from '../exec_args.js';
import type { DynamicQuantArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'dynamic_quant.execute';

/** `execute(strm, { [ARG.SRC]: x, [ARG.DST]: q, [ARG.ATTR_SCALES | ARG.DST]: scales })`. */
export class Primitive extends OpPrimitive<PrimitiveDesc, DynamicQuantArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, pd.impl.task(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    this.begin(FN, stream);
    const p = this.pd.problem, eng = this.pd.engine;
    this.enqueue(stream, {
      src: memArg(FN, eng, args, ARG.SRC, p.src), dst: memArg(FN, eng, args, ARG.DST, p.dst), scales: memArg(FN, eng, args, ARG.ATTR_SCALES | ARG.DST, p.scales),
    });
  }
}
