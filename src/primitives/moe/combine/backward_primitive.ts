import type { Stream } from '../../../runtime/stream.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../../exec_args.js';
import { combineBackwardImplList, type CombineBackwardArgs } from './backward_impls.js';
import type { BackwardPrimitiveDesc, CombineBackwardQuery } from './backward_pd.js';

const FN = 'moe.combine.backward.execute';

/**
 * `new moe.combine.BackwardPrimitive(pd).execute(strm, { [ARG.DIFF_DST], [ARG.DIFF_SRC], and as the pd
 * needs them (`pd.queryMd`): [ARG.SRC], [ARG.MOE_TOPK_WEIGHTS], [ARG.MOE_ROW_OF], [ARG.MOE_TOKEN_INDEX],
 * [ARG.MOE_TOKEN_KS], [ARG.MOE_DIFF_TOPK_WEIGHTS] })`.
 */
export class BackwardPrimitive extends OpPrimitive<BackwardPrimitiveDesc, CombineBackwardArgs> {
  constructor(pd: BackwardPrimitiveDesc) {
    super(pd, combineBackwardImplList.find((i) => i.reject(pd.problem, pd.engine) === undefined)!.executor(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine;
    this.begin(FN, stream);
    const opt = (id: number, what: CombineBackwardQuery): CombineBackwardArgs['src'] => {
      const md = pd.queryMd(what);
      if (md) return memArg(FN, eng, args, id, md);
      noArg(FN, args, id, `the pd does not take it (${what})`);
      return undefined;
    };
    const a: CombineBackwardArgs = {
      diffDst: memArg(FN, eng, args, ARG.DIFF_DST, pd.diffDst),
      src: opt(ARG.SRC, 'src'),
      weights: opt(ARG.MOE_TOPK_WEIGHTS, 'topk_weights'),
      rowOf: opt(ARG.MOE_ROW_OF, 'row_of'),
      tokenIndex: opt(ARG.MOE_TOKEN_INDEX, 'token_index'),
      tokenKs: opt(ARG.MOE_TOKEN_KS, 'token_ks'),
      diffSrc: memArg(FN, eng, args, ARG.DIFF_SRC, pd.problem.src),
      diffWeights: opt(ARG.MOE_DIFF_TOPK_WEIGHTS, 'diff_topk_weights'),
    };
    const all: [CombineBackwardArgs['src'], number][] = [
      [a.diffDst, ARG.DIFF_DST], [a.src, ARG.SRC], [a.weights, ARG.MOE_TOPK_WEIGHTS], [a.rowOf, ARG.MOE_ROW_OF],
      [a.tokenIndex, ARG.MOE_TOKEN_INDEX], [a.tokenKs, ARG.MOE_TOKEN_KS], [a.diffSrc, ARG.DIFF_SRC], [a.diffWeights, ARG.MOE_DIFF_TOPK_WEIGHTS],
    ];
    checkNoOverlap(FN, [[a.diffSrc, ARG.DIFF_SRC], [a.diffWeights, ARG.MOE_DIFF_TOPK_WEIGHTS]], all);
    this.enqueue(stream, a);
  }
}
