import type { Memory } from '../../../memory/memory.js';
import type { Stream } from '../../../runtime/stream.js';
import { check } from '../../../common/status.js';
import { ARG } from '../../args.js';
import { BwdPrimitiveBase, type ExecArgs } from '../primitive_base.js';
import type { P3DataArgs } from './data_impls.js';
import type { PrimitiveDesc } from './data_pd.js';

const FN = 'grouped_gemm_backward_data.execute';

/**
 * `new grouped_gemm_backward_data.Primitive(pd).execute(strm, args)` with, for every expert i,
 * `ARG.MULTIPLE_DST + i` (diff_dst_i), `ARG.MULTIPLE_WEIGHTS + i` (W_i) and `ARG.MULTIPLE_SRC + i`
 * (diff_src_i, written), plus `ARG.RUNTIME_DIMS`. The forward's ids, by position: what sat at dst
 * now carries its gradient in, what sat at src receives its gradient.
 */
export class Primitive extends BwdPrimitiveBase<PrimitiveDesc, P3DataArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, pd.impl.executor(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const pd = this.pd, eng = pd.engine, p = pd.problem;
    this.begin(FN, stream);
    const arg = (id: number, md: Memory['desc']): Memory => BwdPrimitiveBase.arg(FN, eng, args, id, md, '')!;
    const diffDst: Memory[] = [], weights: Memory[] = [], diffSrc: Memory[] = [];
    for (let i = 0; i < p.G; i++) {
      const e = p.experts[i];
      diffDst.push(arg(ARG.MULTIPLE_DST + i, e.diffDst));
      weights.push(arg(ARG.MULTIPLE_WEIGHTS + i, e.weights));
      diffSrc.push(arg(ARG.MULTIPLE_SRC + i, e.diffSrc));
    }
    const runtimeDims = arg(ARG.RUNTIME_DIMS, p.runtimeDims);
    const ins = [...diffDst.map((m, i): [Memory, number] => [m, ARG.MULTIPLE_DST + i]), ...weights.map((m, i): [Memory, number] => [m, ARG.MULTIPLE_WEIGHTS + i]), [runtimeDims, ARG.RUNTIME_DIMS] as [Memory, number]];
    // diff_src_i have runtime rows (no host-known size): the fixed-size weights and runtime dims are checked against their start addresses.
    BwdPrimitiveBase.noOverlap(FN, ins.slice(diffDst.length), diffSrc.map((m, i): [Memory, number] => [m, ARG.MULTIPLE_SRC + i]));
    // diff_src_i and diff_dst_j both have runtime rows: the same start is an overlap whatever the rows (one object given twice included).
    diffSrc.forEach((s, i) => diffDst.forEach((d, j) => {
      if (s.handles[0] === d.handles[0]) check(false, `${FN}: ARG.MULTIPLE_SRC + ${i} values overlap ARG.MULTIPLE_DST + ${j} values`);
    }));
    this.enqueue(stream, { diffDst, weights, diffSrc, runtimeDims }, () => ['grouped_gemm_backward_data', pd.implInfo, 'undef', pd.mdsString(), '', `rows:${Array.from(runtimeDims.values as Int32Array).join('+')}`, `g${p.G}`]);
  }
}
