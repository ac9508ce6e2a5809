import type { Stream } from '../../runtime/stream.js';
import { ARG } from '../args.js';
import type { BwdWeightsArgs } from './impl.js';
import type { PrimitiveDesc } from './weights_pd.js';
import { BwdPrimitiveBase, type ExecArgs } from './primitive_base.js';
import { bwdProblemString } from './problem.js';

const FN = 'matmul_backward_weights.execute';

/**
 * `new matmul_backward_weights.Primitive(pd).execute(strm, { [ARG.SRC]: x, [ARG.DIFF_DST]: dy,
 * [ARG.DIFF_WEIGHTS]: dw, [ARG.DIFF_BIAS]: db })` (diff_bias when the pd has one), plus
 * `[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]` with the grouped-offsets attribute. Every expert's
 * `[K, N]` block of diff_weights is written (zeros for an expert without rows); offsets errors
 * reject `stream.wait()` with nothing written.
 */
export class Primitive extends BwdPrimitiveBase<PrimitiveDesc, BwdWeightsArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, pd.impl.executor(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine;
    this.begin(FN, stream);
    const arg = (id: number, what: Parameters<PrimitiveDesc['queryMd']>[0]): BwdWeightsArgs['offsets'] => BwdPrimitiveBase.arg(FN, eng, args, id, pd.queryMd(what), `the pd does not take it (${what})`);
    const a: BwdWeightsArgs = {
      src: arg(ARG.SRC, 'src')!,
      diffDst: arg(ARG.DIFF_DST, 'diff_dst')!,
      diffWeights: arg(ARG.DIFF_WEIGHTS, 'diff_weights')!,
      diffBias: arg(ARG.DIFF_BIAS, 'diff_bias'),
      offsets: arg(ARG.ATTR_GROUPED_OFFSETS | ARG.SRC, 'grouped_offsets'),
    };
    const ins: [BwdWeightsArgs['offsets'], number][] = [[a.src, ARG.SRC], [a.diffDst, ARG.DIFF_DST], [a.offsets, ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]];
    const outs: [BwdWeightsArgs['offsets'], number][] = [[a.diffWeights, ARG.DIFF_WEIGHTS], [a.diffBias, ARG.DIFF_BIAS]];
    BwdPrimitiveBase.noOverlap(FN, outs, [...ins, ...outs]);
    this.enqueue(stream, a, () => ['matmul_backward_weights', pd.implInfo, 'undef', pd.mdsString(), '', '', bwdProblemString(pd.problem)]);
  }
}
