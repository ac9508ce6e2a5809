import { makeView, type ValuesView } from '../../common/data_type.js';
import { DnnlError } from '../../common/status.js';
import type { Memory } from '../../memory/memory.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import { ARG, argName } from '../args.js';
import { elementReader, type QuantArg } from '../../attr/fusion.js';
import { elementWriter, gemmF64, makeEpilogue, quantView, quantViews } from '../matmul/ref_matmul.js';
import type { GroupedGemmArgs, GroupedGemmImpl } from './impl_list.js';
import { checkedRuntimeDims, rowCapacity } from './runtime_dims.js';
import { EXPERT_QUANT_ARG_ID } from './problem.js';

/** A view of the first `rows` rows of a runtime-M memory (its descriptor alone has no size). */
function rowsView(m: Memory, rows: number): ValuesView {
  const md = m.desc;
  const last = md.ndims === 2 ? (md.dims[1] - 1) * md.strides[1] + 1 : 1;
  const n = rows === 0 ? 0 : (rows - 1) * md.strides[0] + last;
  return makeView(md.dataType, m.engine.buffer, m.handles[0], n);
}

/** Values of a scales / zero-point / src1 memory: all of it, or its first M rows when they are per row. */
function valuesOf(m: Memory, rows: number): ValuesView {
  return m.desc.hasRuntimeDims ? rowsView(m, rows) : m.values;
}


/** Per-row values memories must hold M_i rows; checked with the runtime dims, before any row is touched. */
function checkRowValues(a: GroupedGemmArgs, M: Int32Array, binaryPositions: readonly number[]): void {
  const check = (m: Memory, name: string, i: number): void => {
    if (!m.desc.hasRuntimeDims) return;
    const cap = rowCapacity(m);
    if (M[i] > cap) throw new DnnlError('invalid_arguments', `ARG.RUNTIME_DIMS[${i}] = ${M[i]} rows do not fit ${name} (${cap} rows fit)`);
  };
  for (const [base, tbl] of [[ARG.ATTR_SCALES, a.scales], [ARG.ATTR_ZERO_POINTS, a.zeroPoints]] as const) {
    for (const [arg, mems] of Object.entries(tbl) as [QuantArg, readonly (Memory | undefined)[]][]) mems.forEach((m, i) => m && check(m, argName(base | (EXPERT_QUANT_ARG_ID[arg] + i)), i));
  }
  a.binary.forEach((mems, j) => mems.forEach((m, i) => check(m, argName(ARG.ATTR_MULTIPLE_POST_OP(binaryPositions[j]) | (ARG.MULTIPLE_SRC + i)), i)));
}

/** Reference Proposal #3: one float64 loop nest per expert, M from the runtime-dims buffer; all of rfcs/0002. */
export const refGroupedGemm: GroupedGemmImpl = {
  name: 'ref:any',
  reject(p) {
    if (p.attr.dynamicQuantization) return 'dynamic quantization (attr.setDynamicQuantization) runs on the wasm kernels only';
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
        checkRowValues(a, M, p.experts[0].fusion.binary.map((b) => b.position));
        const ops = p.attr.postOps.entries;
        p.experts.forEach((e, i) => {
          const rows = M[i];
          const f = e.fusion;
          const src = elementReader(e.src.dataType, rowsView(a.src[i], rows));
          const wei = elementReader(e.weights.dataType, a.weights[i].values);
          const dv = rowsView(a.dst[i], rows);
          const dstR = elementReader(e.dst.dataType, dv), dstW = elementWriter(e.dst.dataType, dv);
          // This expert's own memories (attr.setExpertScales may give other experts scales it has not).
          const sOf = (arg: QuantArg): Memory | undefined => a.scales[arg]?.[i], zOf = (arg: QuantArg): Memory | undefined => a.zeroPoints[arg]?.[i];
          const vals = (arg: QuantArg): { scale?: ValuesView; zp?: ValuesView } => {
            const s = sOf(arg), z = zOf(arg);
            return { scale: s && valuesOf(s, rows), zp: z && valuesOf(z, rows) };
          };
          const qs = (arg: QuantArg): Partial<Record<QuantArg, Memory>> => { const s = sOf(arg); return s ? { [arg]: s } : {}; };
          const qz = (arg: QuantArg): Partial<Record<QuantArg, Memory>> => { const z = zOf(arg); return z ? { [arg]: z } : {}; };
          const deqSrc = quantViews(f, qs('src'), qz('src'), 'src', vals('src'));
          const deqWei = quantViews(f, qs('weights'), qz('weights'), 'weights', vals('weights'));
          const dv2 = vals('dst');
          const ep = makeEpilogue(ops, f, a.binary.map((mems, j) => ({ read: elementReader(f.binary[j].md.dataType, valuesOf(mems[i], rows)) })),
            quantView(f.scales.dst, a.scales.dst?.[i], dv2.scale), quantView(f.zeroPoints.dst, a.zeroPoints.dst?.[i], dv2.zp));
          const { K, N, dstN } = e;
          const [ss] = e.src.strides, [wk, wn] = e.weights.strides, [ds] = e.dst.strides;
          const idx = [0, 0];
          const A = new Float64Array(rows * K);
          for (let m = 0; m < rows; m++) {
            for (let k = 0; k < K; k++) {
              idx[0] = m; idx[1] = k;
              A[m * K + k] = deqSrc(src(m * ss + k), 0, idx);
            }
          }
          const W = new Float64Array(K * N);
          for (let k = 0; k < K; k++) {
            for (let c = 0; c < N; c++) {
              idx[0] = k; idx[1] = c;
              W[k * N + c] = deqWei(wei(k * wk + c * wn), 0, idx);
            }
          }
          const C = gemmF64(A, W, rows, K, N);
          for (let m = 0; m < rows; m++) {
            const col = (c: number): number => Math.fround(C[m * N + c]);
            for (let n = 0; n < dstN; n++) {
              const di = m * ds + n;
              idx[0] = m; idx[1] = n;
              dstW(di, ep.apply(ep.value(col, n, N), 0, idx, () => dstR(di)));
            }
          }
        });
      },
    };
  },
};
