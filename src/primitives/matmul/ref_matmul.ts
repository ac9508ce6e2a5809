import { fromStored, toStored, type DataType } from '../../common/data_type.js';
import { eltwiseScalar } from '../../attr/eltwise.js';
import type { PostOp } from '../../attr/post_ops.js';
import { tagToStrides } from '../../memory/format_tag.js';
import { MemoryDesc } from '../../memory/desc.js';
import type { Memory } from '../../memory/memory.js';
import type { Engine } from '../../runtime/engine.js';
import type { MatmulArgs, MatmulExecutor, MatmulImpl } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { checkedOffsets, groupingOf } from './runtime_offsets.js';

const FLOAT_TYPES: readonly DataType[] = ['f32', 'bf16', 'f16'];

/** Reads element i of a memory's values as a number. */
function reader(m: Memory): (i: number) => number {
  const v = m.values;
  const t = m.desc.dataType;
  return t === 'f32' ? (i) => v[i] : (i) => fromStored(t, v[i]);
}

function writer(m: Memory): (i: number, x: number) => void {
  const v = m.values;
  const t = m.desc.dataType;
  return t === 'f32' ? (i, x) => { v[i] = x; } : (i, x) => { v[i] = toStored(t, x); };
}

function applyPostOps(x: number, ops: readonly PostOp[], prev: () => number): number {
  let r = x;
  for (const op of ops) r = op.kind === 'sum' ? r + op.scale * prev() : eltwiseScalar(op.alg, r, op.alpha, op.beta);
  return r;
}

/** Bias element for a dst position: each bias dim is either the dst extent or 1 (broadcast). */
function biasIndex(bias: MemoryDesc, idx: readonly number[]): number {
  let off = 0;
  for (let d = 0; d < idx.length; d++) if (bias.dims[d] !== 1) off += idx[d] * bias.strides[d];
  return off;
}

/**
 * The reference implementation: plain loops over logical indices with float64 accumulation, any
 * strides, every kind. Last in the implementation list; the oracle the fast kernels are tested against.
 */
export const refMatmul: MatmulImpl = {
  name: 'ref:any',
  reject(p) {
    if (p.weights.format === 'packed') return 'packed weights are read only by the wasm kernels';
    for (const [name, md] of [['src', p.src], ['weights', p.weights], ['dst', p.dst]] as const) {
      if (!FLOAT_TYPES.includes(md.dataType)) return `${name} data type ${md.dataType} is not supported (f32, bf16, f16)`;
    }
    if (p.bias && !FLOAT_TYPES.includes(p.bias.dataType)) return `bias data type ${p.bias.dataType} is not supported`;
    return undefined;
  },
  weightsLayout(p) {
    const w = p.weights;
    const t = w.ndims === 3 ? 'abc' : w.ndims === 2 ? 'ab' : 'abcdefghijkl'.slice(0, w.ndims);
    return new MemoryDesc({ dims: w.dims, dataType: w.dataType, format: 'blocked', strides: tagToStrides(t, w.dims, 'weights') });
  },
  createExecutor(p: MatmulProblem, _engine: Engine): MatmulExecutor {
    return { task: (args) => () => runRef(p, args) };
  },
};

function runRef(p: MatmulProblem, a: MatmulArgs): void {
  if (p.kind === 'grouped_m') return refGroupedM(p, a);
  if (p.kind === 'grouped_k') return refGroupedK(p, a);
  return refDense(p, a);
}

function refGroupedM(p: MatmulProblem, a: MatmulArgs): void {
  const offs = checkedOffsets(groupingOf(p, a));
  const [ss0, ss1] = p.src.strides;
  const [ws0, ws1, ws2] = p.weights.strides;
  const [ds0, ds1] = p.dst.strides;
  const src = reader(a.src), wei = reader(a.weights), dstR = reader(a.dst), dstW = writer(a.dst);
  const bias = a.bias ? reader(a.bias) : undefined;
  const ops = p.attr.postOps.entries;
  for (let g = 0; g < p.G; g++) {
    for (let m = offs[g]; m < offs[g + 1]; m++) {
      for (let n = 0; n < p.N; n++) {
        let acc = 0;
        for (let k = 0; k < p.K; k++) acc += src(m * ss0 + k * ss1) * wei(g * ws0 + k * ws1 + n * ws2);
        if (bias && p.bias) acc += bias(biasIndex(p.bias, [g, n]));
        const di = m * ds0 + n * ds1;
        dstW(di, applyPostOps(Math.fround(acc), ops, () => dstR(di)));
      }
    }
  }
}

function refGroupedK(p: MatmulProblem, a: MatmulArgs): void {
  const offs = checkedOffsets(groupingOf(p, a));
  const [ss0, ss1] = p.src.strides;
  const [ws0, ws1] = p.weights.strides;
  const [ds0, ds1, ds2] = p.dst.strides;
  const src = reader(a.src), wei = reader(a.weights), dstR = reader(a.dst), dstW = writer(a.dst);
  const bias = a.bias ? reader(a.bias) : undefined;
  const ops = p.attr.postOps.entries;
  for (let g = 0; g < p.G; g++) {
    for (let m = 0; m < p.M; m++) {
      for (let n = 0; n < p.N; n++) {
        let acc = 0;
        for (let k = offs[g]; k < offs[g + 1]; k++) acc += src(m * ss0 + k * ss1) * wei(k * ws0 + n * ws1);
        if (bias && p.bias) acc += bias(biasIndex(p.bias, [g, m, n]));
        const di = g * ds0 + m * ds1 + n * ds2;
        dstW(di, applyPostOps(Math.fround(acc), ops, () => dstR(di)));
      }
    }
  }
}

function refDense(p: MatmulProblem, a: MatmulArgs): void {
  const nb = p.batch.length;
  const ss = p.src.strides, ws = p.weights.strides, ds = p.dst.strides;
  const src = reader(a.src), wei = reader(a.weights), dstR = reader(a.dst), dstW = writer(a.dst);
  const bias = a.bias ? reader(a.bias) : undefined;
  const ops = p.attr.postOps.entries;
  const batches = p.batch.reduce((x, y) => x * y, 1);
  const idx = new Array<number>(nb + 2).fill(0);
  for (let b = 0; b < batches; b++) {
    let rem = b, sOff = 0, wOff = 0, dOff = 0;
    for (let d = nb - 1; d >= 0; d--) {
      const i = rem % p.batch[d];
      rem = Math.floor(rem / p.batch[d]);
      idx[d] = i;
      if (p.src.dims[d] !== 1) sOff += i * ss[d];
      if (p.weights.dims[d] !== 1) wOff += i * ws[d];
      dOff += i * ds[d];
    }
    for (let m = 0; m < p.M; m++) {
      for (let n = 0; n < p.N; n++) {
        let acc = 0;
        for (let k = 0; k < p.K; k++) acc += src(sOff + m * ss[nb] + k * ss[nb + 1]) * wei(wOff + k * ws[nb] + n * ws[nb + 1]);
        idx[nb] = m;
        idx[nb + 1] = n;
        if (bias && p.bias) acc += bias(biasIndex(p.bias, idx));
        const di = dOff + m * ds[nb] + n * ds[nb + 1];
        dstW(di, applyPostOps(Math.fround(acc), ops, () => dstR(di)));
      }
    }
  }
}
