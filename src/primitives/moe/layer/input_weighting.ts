/**
 * The layer's `routingWeight: 'input'` stage (Llama-4: the expert sees `x · w`, so the weight passes
 * through the GLU): each routed row of the permuted hidden copy is multiplied by its slot's routing
 * weight, `permuted[r] *= topk_weights[token_index[r] * k + token_ks[r]]`, for the rows dispatch
 * placed (`[0, offsets[G])`). Runs on the stream like a reference implementation: it reads the
 * offsets and row maps when the stage runs, never at enqueue time.
 */
import { DnnlError } from '../../../common/status.js';
import { elementReader } from '../../../attr/fusion.js';
import { elementWriter } from '../../matmul/ref_matmul.js';
import type { Memory } from '../../../memory/memory.js';
import type { Stream } from '../../../runtime/stream.js';

export interface InputWeightingArgs {
  /** `[R, K]` permuted hidden, grouped by expert (its offsets are dispatch's). */
  readonly permuted: Memory;
  readonly tokenIndex: Memory;
  readonly tokenKs: Memory;
  /** `[T, k]` f32 routing weights. */
  readonly topkWeights: Memory;
}

export function enqueueInputWeighting(strm: Stream, T: number, k: number, a: InputWeightingArgs): void {
  strm.enqueue(() => {
    const md = a.permuted.desc, G = md.grouped!.groupCount, [R, K] = md.dims, ld = md.strides[0];
    const rows = a.permuted.offsets[G];
    if (!(rows >= 0 && rows <= R)) throw new DnnlError('invalid_arguments', `moe.layer (input weighting): offsets[${G}] = ${rows} must be in [0, ${R}]`);
    const ti = a.tokenIndex.values as Int32Array, ks = a.tokenKs.values as Int32Array, w = a.topkWeights.values as Float32Array;
    const read = elementReader(md.dataType, a.permuted.values), write = elementWriter(md.dataType, a.permuted.values);
    for (let r = 0; r < rows; r++) {
      const t = ti[r], s = ks[r];
      // A padding row (token -1) holds zeros and keeps them.
      const wr = t >= 0 && t < T && s >= 0 && s < k ? w[t * k + s] : 0;
      for (let c = 0; c < K; c++) write(r * ld + c, Math.fround(read(r * ld + c) * wr));
    }
  }, a);
}
