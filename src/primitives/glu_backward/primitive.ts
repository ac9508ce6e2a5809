import { check } from '../../common/status.js';
import type { Stream } from '../../runtime/stream.js';
import { OpPrimitive } from '../op_primitive.js';
import { ARG, argName } from '../args.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../exec_args.js';
import type { GluBackwardArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'glu_backward.execute';

/**
 * `new glu_backward.Primitive(pd).execute(strm, { [ARG.SRC]: h13, [ARG.DIFF_DST]: diff, [ARG.DIFF_SRC]:
 * dh13, [ARG.GLU_PROB]: prob, [ARG.GLU_DIFF_PROB]: dprob })` (the last two when the pd has `prob`).
 * Argument errors throw here; bad offsets are raised by `stream.wait()`, with nothing written.
 */
export class Primitive extends OpPrimitive<PrimitiveDesc, GluBackwardArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, pd.impl.executor(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine, p = pd.problem;
    this.begin(FN, stream);
    if (!p.prob) {
      noArg(FN, args, ARG.GLU_PROB, 'the pd has no prob');
      noArg(FN, args, ARG.GLU_DIFF_PROB, 'the pd has no prob');
    }
    const a: GluBackwardArgs = {
      src: memArg(FN, eng, args, ARG.SRC, p.src),
      diffDst: memArg(FN, eng, args, ARG.DIFF_DST, p.diffDst),
      diffSrc: memArg(FN, eng, args, ARG.DIFF_SRC, p.diffSrc),
      prob: p.prob ? memArg(FN, eng, args, ARG.GLU_PROB, p.prob) : undefined,
      diffProb: p.prob ? memArg(FN, eng, args, ARG.GLU_DIFF_PROB, p.prob) : undefined,
    };
    const all: [GluBackwardArgs['prob'], number][] = [
      [a.src, ARG.SRC], [a.diffDst, ARG.DIFF_DST], [a.diffSrc, ARG.DIFF_SRC], [a.prob, ARG.GLU_PROB], [a.diffProb, ARG.GLU_DIFF_PROB],
    ];
    // checkNoOverlap skips an output given again as another argument: reject that here.
    for (const [o, oid] of [[a.diffSrc, ARG.DIFF_SRC], [a.diffProb, ARG.GLU_DIFF_PROB]] as const) {
      for (const [m, id] of all) if (o && m === o && id !== oid) check(false, `${FN}: ${argName(oid)} values overlap ${argName(id)} values`);
    }
    checkNoOverlap(FN, [[a.diffSrc, ARG.DIFF_SRC], [a.diffProb, ARG.GLU_DIFF_PROB]], all);
    this.enqueue(stream, a);
  }
}
