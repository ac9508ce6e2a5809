import type { Stream } from '../../runtime/stream.js';
import { ARG } from '../args.js';
import type { BwdDataArgs } from './impl.js';
import type { PrimitiveDesc } from './data_pd.js';
import { BwdPrimitiveBase, type ExecArgs } from './primitive_base.js';
import { bwdProblemString } from './problem.js';

const FN = 'matmul_backward_data.execute';

/**
 * `new matmul_backward_data.Primitive(pd).execute(strm, { [ARG.DIFF_DST]: dy, [ARG.WEIGHTS]: w,
 * [ARG.DIFF_SRC]: dx })`, plus `[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]` with the grouped-offsets
 * attribute. Offsets errors reject `stream.wait()` with nothing written; rows past the last offset
 * of diff_src are not written.
 */
export class Primitive extends BwdPrimitiveBase<PrimitiveDesc, BwdDataArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, pd.impl.executor(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine;
    this.begin(FN, stream);
    const arg = (id: number, what: Parameters<PrimitiveDesc['queryMd']>[0]): BwdDataArgs['offsets'] => BwdPrimitiveBase.arg(FN, eng, args, id, pd.queryMd(what), `the pd does not take it (${what})`);
    const a: BwdDataArgs = {
      diffDst: arg(ARG.DIFF_DST, 'diff_dst')!,
      weights: arg(ARG.WEIGHTS, 'weights')!,
      diffSrc: arg(ARG.DIFF_SRC, 'diff_src')!,
      offsets: arg(ARG.ATTR_GROUPED_OFFSETS | ARG.SRC, 'grouped_offsets'),
    };
    BwdPrimitiveBase.noOverlap(FN, [[a.diffSrc, ARG.DIFF_SRC]], [[a.diffDst, ARG.DIFF_DST], [a.weights, ARG.WEIGHTS], [a.offsets, ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]]);
    this.enqueue(stream, a, () => ['matmul_backward_data', pd.implInfo, 'undef', pd.mdsString(), '', '', bwdProblemString(pd.problem)]);
  }
}
