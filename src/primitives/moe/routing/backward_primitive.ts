import type { Stream } from '../../../runtime/stream.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, type ExecArgs } from '../../exec_args.js';
import type { RoutingBackwardArgs } from './backward_impls.js';
import type { BackwardPrimitiveDesc } from './backward_pd.js';

const FN = 'moe.routing.backward.execute';

/**
 * `new moe.routing.BackwardPrimitive(pd).execute(strm, { [ARG.SRC]: logits, [ARG.MOE_TOPK_IDS]: ids,
 * [ARG.MOE_DIFF_TOPK_WEIGHTS]: dw, [ARG.DIFF_SRC]: dlogits })`.
 */
export class BackwardPrimitive extends OpPrimitive<BackwardPrimitiveDesc, RoutingBackwardArgs> {
  constructor(pd: BackwardPrimitiveDesc) {
    super(pd, pd.impl.executor(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine;
    this.begin(FN, stream);
    const a: RoutingBackwardArgs = {
      src: memArg(FN, eng, args, ARG.SRC, pd.queryMd('src')),
      topkIds: memArg(FN, eng, args, ARG.MOE_TOPK_IDS, pd.queryMd('topk_ids')),
      diffTopkWeights: memArg(FN, eng, args, ARG.MOE_DIFF_TOPK_WEIGHTS, pd.queryMd('diff_topk_weights')),
      diffSrc: memArg(FN, eng, args, ARG.DIFF_SRC, pd.queryMd('diff_src')),
    };
    checkNoOverlap(FN, [[a.diffSrc, ARG.DIFF_SRC]], [[a.src, ARG.SRC], [a.topkIds, ARG.MOE_TOPK_IDS], [a.diffTopkWeights, ARG.MOE_DIFF_TOPK_WEIGHTS]]);
    this.enqueue(stream, a);
  }
}
