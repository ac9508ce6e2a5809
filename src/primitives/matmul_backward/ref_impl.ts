import { toStored, type DataType } from '../../common/data_type.js';
import { elementReader } from '../../attr/fusion.js';
import { plainDesc } from '../../memory/desc.js';
import type { Memory } from '../../memory/memory.js';
import { stateless } from '../../runtime/lifetime.js';
import { ARG } from '../args.js';
import type { BwdDataImpl, BwdWeightsImpl } from './impl.js';
import { checkedBwdOffsets, rowsGrouping } from './runtime_offsets.js';

/**
 * The reference (engines without kernels, and problems the kernels reject): plain loops with f32
 * products and sums (Math.fround), reading and writing every data type through its conversions.
 * Offsets are validated first, with the kernels' rules and messages, so nothing is written on an error.
 */

function writer(m: Memory): (i: number, x: number) => void {
  const v = m.values, t: DataType = m.desc.dataType;
  return t === 'f32' ? (i, x) => { v[i] = x; } : (i, x) => { v[i] = toStored(t, Math.fround(x)); };
}

const reader = (m: Memory): ((i: number) => number) => elementReader(m.desc.dataType, m.values);

export const refData: BwdDataImpl = {
  name: 'ref:any',
  describe: () => 'ref:any',
  reject: (p) => (p.weights.format === 'packed' ? 'packed weights are read only by the wasm kernels' : undefined),
  weightsLayout: (p) => plainDesc(p.weights.dims, p.weights.dataType, 'abc'),
  executor: (p) => stateless((a) => () => {
    const fn = 'matmul_backward_data.execute';
    const o = checkedBwdOffsets(fn, rowsGrouping(p.G, p.M, [a.diffDst, ARG.DIFF_DST], p.offsetsFrom === 'desc' ? [a.diffSrc, ARG.DIFF_SRC] : undefined, a.offsets));
    const dd = reader(a.diffDst), w = reader(a.weights), out = writer(a.diffSrc);
    const [d0, d1] = p.diffDst.strides, [s0, s1] = p.diffSrc.strides, [wg, wk, wn] = p.weights.strides;
    const f = Math.fround;
    for (let g = 0; g < p.G; g++)
      for (let r = o[g]; r < o[g + 1]; r++)
        for (let k = 0; k < p.K; k++) {
          let acc = 0;
          for (let n = 0; n < p.N; n++) acc = f(acc + f(dd(r * d0 + n * d1) * w(g * wg + k * wk + n * wn)));
          out(r * s0 + k * s1, acc);
        }
  }),
};

export const refWeights: BwdWeightsImpl = {
  name: 'ref:any',
  describe: () => 'ref:any',
  reject: () => undefined,
  executor: (p) => stateless((a) => () => {
    const fn = 'matmul_backward_weights.execute';
    const o = checkedBwdOffsets(fn, rowsGrouping(p.G, p.M, [a.src, ARG.SRC], p.offsetsFrom === 'desc' ? [a.diffDst, ARG.DIFF_DST] : undefined, a.offsets));
    const x = reader(a.src), dd = reader(a.diffDst), out = writer(a.diffWeights);
    const [x0, x1] = p.src.strides, [d0, d1] = p.diffDst.strides, [vg, vk, vn] = p.diffWeights.strides;
    const f = Math.fround;
    for (let g = 0; g < p.G; g++)
      for (let k = 0; k < p.K; k++)
        for (let n = 0; n < p.N; n++) {
          let acc = 0;
          for (let r = o[g]; r < o[g + 1]; r++) acc = f(acc + f(x(r * x0 + k * x1) * dd(r * d0 + n * d1)));
          out(g * vg + k * vk + n * vn, acc);
        }
    if (!a.diffBias || !p.diffBias) return;
    const b = writer(a.diffBias), bs = p.diffBias.strides, bg = bs[0], bn = bs[bs.length - 1];
    for (let g = 0; g < p.G; g++)
      for (let n = 0; n < p.N; n++) {
        let acc = 0;
        for (let r = o[g]; r < o[g + 1]; r++) acc = f(acc + dd(r * d0 + n * d1));
        b(g * bg + n * bn, acc);
      }
  }),
};
