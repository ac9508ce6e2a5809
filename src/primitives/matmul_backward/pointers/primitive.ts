import { check } from '../../../common/status.js';
import type { Memory } from '../../../memory/memory.js';
import type { Stream } from '../../../runtime/stream.js';
import { ARG } from '../../args.js';
import { BwdPrimitiveBase, type ExecArgs } from '../primitive_base.js';
import type { P3WeightsArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'grouped_gemm_backward_weights.execute';

/**
 * `new grouped_gemm_backward_weights.Primitive(pd).execute(strm, args)` with, for every expert i,
 * `ARG.MULTIPLE_SRC + i` (src_i), `ARG.MULTIPLE_DST + i` (diff_dst_i: the gradient at the expert's
 * dst) and `ARG.MULTIPLE_WEIGHTS + i` (diff_weights_i, written), plus `ARG.RUNTIME_DIMS` (and
 * `ARG.DIFF_BIAS` when the pd has a bias gradient). Runtime
 * rows are checked against each expert's allocations when the work runs, before anything is written.
 */
export class Primitive extends BwdPrimitiveBase<PrimitiveDesc, P3WeightsArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, pd.impl.executor(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine, p = pd.problem;
    this.begin(FN, stream);
    const arg = (id: number, md: Memory['desc']): Memory => BwdPrimitiveBase.arg(FN, eng, args, id, md, '')!;
    const src: Memory[] = [], diffDst: Memory[] = [], diffWeights: Memory[] = [];
    for (let i = 0; i < p.G; i++) {
      const e = p.experts[i];
      src.push(arg(ARG.MULTIPLE_SRC + i, e.src));
      diffDst.push(arg(ARG.MULTIPLE_DST + i, e.diffDst));
      diffWeights.push(arg(ARG.MULTIPLE_WEIGHTS + i, e.diffWeights));
    }
    const runtimeDims = arg(ARG.RUNTIME_DIMS, p.runtimeDims);
    const diffBias = BwdPrimitiveBase.arg(FN, eng, args, ARG.DIFF_BIAS, p.diffBias, 'the pd has no diff_bias');
    check(new Set(diffWeights.map((m) => m.handles[0])).size === p.G, `${FN}: every expert needs its own diff_weights buffer (two ARG.MULTIPLE_WEIGHTS share one)`);
    const outs: [Memory | undefined, number][] = [...diffWeights.map((m, i): [Memory, number] => [m, ARG.MULTIPLE_WEIGHTS + i]), [diffBias, ARG.DIFF_BIAS]];
    const ins = [...src.map((m, i): [Memory, number] => [m, ARG.MULTIPLE_SRC + i]), ...diffDst.map((m, i): [Memory, number] => [m, ARG.MULTIPLE_DST + i]), [runtimeDims, ARG.RUNTIME_DIMS] as [Memory, number]];
    // Runtime-rows inputs have no host-known size: an output is rejected when one of them starts inside it.
    BwdPrimitiveBase.noOverlap(FN, outs, [...ins, ...outs]);
    this.enqueue(stream, { src, diffDst, diffWeights, diffBias, runtimeDims }, () => ['grouped_gemm_backward_weights', pd.implInfo, 'undef', pd.mdsString(), '', `rows:${Array.from(runtimeDims.values as Int32Array).join('+')}`, `g${p.G}`]);
  }
}
