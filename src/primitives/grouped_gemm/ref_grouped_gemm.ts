import { fromStored, makeView, toStored, type ValuesView } from '../../common/data_type.js';
import type { Memory } from '../../memory/memory.js';
import { eltwiseScalar } from '../../attr/eltwise.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import type { GroupedGemmImpl } from './impl_list.js';
import { checkedRuntimeDims, rowCapacity } from './runtime_dims.js';

/** A view of the first `rows` rows of a runtime-M memory (its descriptor alone has no size). */
function rowsView(m: Memory, rows: number): ValuesView {
  const md = m.desc;
  const n = rows === 0 ? 0 : (rows - 1) * md.strides[0] + md.dims[1];
  return makeView(md.dataType, m.engine.buffer, m.handles[0], n);
}

/** Reference Proposal #3: one float64 loop nest per expert, M from the runtime-dims buffer. */
export const refGroupedGemm: GroupedGemmImpl = {
  name: 'ref:any',
  reject(p) {
    if (p.experts.some((e) => e.weights.format === 'packed')) return 'packed weights are read only by the wasm kernels';
    return undefined;
  },
  weightsLayout(e) {
    return new MemoryDesc({ dims: e.weights.dims, dataType: e.weights.dataType, format: 'blocked', strides: tagToStrides('ab', e.weights.dims, 'weights') });
  },
  createExecutor(p) {
    return {
      task: (a) => () => {
        const M = checkedRuntimeDims(a.runtimeDims.values as Int32Array, (i) => Math.min(rowCapacity(a.src[i]), rowCapacity(a.dst[i])));
        const ops = p.attr.postOps.entries;
        p.experts.forEach((e, i) => {
          const sv = rowsView(a.src[i], M[i]), wv = a.weights[i].values, dv = rowsView(a.dst[i], M[i]);
          const [ss] = e.src.strides, [wk, wn] = e.weights.strides, [ds] = e.dst.strides;
          for (let m = 0; m < M[i]; m++) {
            for (let n = 0; n < e.N; n++) {
              let acc = 0;
              for (let k = 0; k < e.K; k++) acc += fromStored(e.src.dataType, sv[m * ss + k]) * fromStored(e.weights.dataType, wv[k * wk + n * wn]);
              let r = Math.fround(acc);
              const di = m * ds + n;
              for (const op of ops) r = op.kind === 'sum' ? r + op.scale * fromStored(e.dst.dataType, dv[di]) : eltwiseScalar(op.alg, r, op.alpha, op.beta);
              dv[di] = toStored(e.dst.dataType, r);
            }
          }
        });
      },
    };
  },
};
