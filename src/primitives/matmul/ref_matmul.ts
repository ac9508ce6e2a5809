import { toStored, type DataType, type ValuesView } from '../../common/data_type.js';
import { eltwiseScalar, gluColumns, gluScalar } from '../../attr/eltwise.js';
import { tagToStrides } from '../../memory/format_tag.js';
import { MemoryDesc } from '../../memory/desc.js';
import type { Memory } from '../../memory/memory.js';
import type { Engine } from '../../runtime/engine.js';
import type { MatmulArgs, MatmulExecutor, MatmulImpl } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { checkedOffsets, groupingOf } from './runtime_offsets.js';
import { ROW_ERR, checkRowMaps, checkedCounts, rowMapsError } from './row_maps.js';
import { elementReader, mapIndex, type Fusion, type GluParam, type IndexMap, type QuantArg, type QuantParam } from '../../attr/fusion.js';
import type { PostOp } from '../../attr/post_ops.js';
import { gluBackwardColumns, gluBackwardScalar, type GluGrad } from '../../attr/glu_backward.js';

/** Bias element for a position: each bias dim is either the dst extent or 1 (broadcast). */
function biasIndex(bias: MemoryDesc, idx: readonly number[]): number {
  let off = 0;
  for (let d = 0; d < idx.length; d++) if (bias.dims[d] !== 1) off += idx[d] * bias.strides[d];
  return off;
}

/** Stores a value computed in f32: f32 directly, everything else converted (RNE; saturating ints and fp8). */
export function elementWriter(t: DataType, v: ValuesView): (i: number, x: number) => void {
  return t === 'f32' ? (i, x) => { v[i] = x; } : (i, x) => { v[i] = toStored(t, Math.fround(x)); };
}

/** A scales or zero-point memory with the map that indexes it. */
export interface QuantView {
  readonly read: (i: number) => number;
  readonly map: IndexMap;
}

export function quantView(q: QuantParam | undefined, m: Memory | undefined, values?: ValuesView): QuantView | undefined {
  if (!q || !m) return undefined;
  return { read: elementReader(q.dataType, values ?? m.values), map: q.map };
}

/** Operand dequantization of rfcs/0002 (1): `(x - zp) * scale` at the element's logical coordinate. */
export function dequantizer(zp: QuantView | undefined, sc: QuantView | undefined): (x: number, g: number, idx: readonly number[]) => number {
  if (!zp && !sc) return (x) => x;
  return (x, g, idx) => {
    let v = x;
    if (zp) v -= zp.read(mapIndex(zp.map, g, idx));
    if (sc) v *= sc.read(mapIndex(sc.map, g, idx));
    return v;
  };
}

export function quantViews(f: Fusion, scales: Readonly<Partial<Record<QuantArg, Memory>>>, zps: Readonly<Partial<Record<QuantArg, Memory>>>, arg: QuantArg, values?: { scale?: ValuesView; zp?: ValuesView }): ReturnType<typeof dequantizer> {
  return dequantizer(quantView(f.zeroPoints[arg], zps[arg], values?.zp), quantView(f.scales[arg], scales[arg], values?.scale));
}

/**
 * rfcs/0002 (3)-(4) after the GEMM: GLU (on the f32 GEMM columns, bias included), then eltwise /
 * binary / sum in chain order, then `/ s_dst + zp_dst`. Returns the value before the dst conversion.
 */
export interface Epilogue {
  readonly glu: GluParam | undefined;
  /** Columns of the GEMM for destination column n (one, or gate and up). */
  value(col: (c: number) => number, n: number, N: number): number;
  apply(x: number, g: number, idx: readonly number[], prev: () => number): number;
}

export function makeEpilogue(ops: readonly PostOp[], f: Fusion, binary: readonly { read: (i: number) => number }[], dstScale: QuantView | undefined, dstZp: QuantView | undefined): Epilogue {
  const steps: ((x: number, g: number, idx: readonly number[], prev: () => number) => number)[] = [];
  let bi = 0;
  for (const op of ops) {
    if (op.kind === 'eltwise') steps.push((x) => eltwiseScalar(op.alg, x, op.alpha, op.beta));
    else if (op.kind === 'sum') steps.push((x, _g, _idx, prev) => x + op.scale * prev());
    else if (op.kind === 'binary') {
      const map = f.binary[bi].map, r = binary[bi].read;
      bi++;
      steps.push(op.alg === 'binary_mul' ? (x, g, idx) => x * r(mapIndex(map, g, idx)) : (x, g, idx) => x + r(mapIndex(map, g, idx)));
    }
  }
  const glu = f.glu;
  return {
    glu,
    value(col, n, N) {
      if (!glu) return col(n);
      const [gc, uc] = gluColumns(glu.layout, N, n);
      return gluScalar(glu.alg, col(gc), col(uc), glu.alpha, glu.limit);
    },
    apply(x0, g, idx, prev) {
      let x = x0;
      for (const s of steps) x = s(x, g, idx, prev);
      if (dstScale) x /= dstScale.read(mapIndex(dstScale.map, g, idx));
      if (dstZp) x += dstZp.read(mapIndex(dstZp.map, g, idx));
      return x;
    },
  };
}

/** C[rows x N] = A[rows x K] * W[K x N] in float64, k ascending for every element. */
export function gemmF64(A: Float64Array, W: Float64Array, rows: number, K: number, N: number): Float64Array {
  const C = new Float64Array(rows * N);
  for (let i = 0; i < rows; i++) {
    for (let k = 0; k < K; k++) {
      const a = A[i * K + k];
      const w0 = k * N, c0 = i * N;
      for (let j = 0; j < N; j++) C[c0 + j] += a * W[w0 + j];
    }
  }
  return C;
}

/**
 * The reference implementation: plain loops over logical indices with float64 accumulation, any
 * strides, every kind, every data type, scale, zero point and post-op of rfcs/0002. Last in the
 * implementation list; the oracle the fast kernels are tested against.
 */
export const refMatmul: MatmulImpl = {
  name: 'ref:any',
  reject(p) {
    if (p.weights.format === 'packed') return 'packed weights are read only by the wasm kernels';
    if (p.attr.dynamicQuantization) return 'dynamic quantization (attr.setDynamicQuantization) runs on the wasm kernels only';
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

interface Prepared {
  readonly src: (i: number) => number;
  readonly wei: (i: number) => number;
  readonly dstR: (i: number) => number;
  readonly dstW: (i: number, x: number) => void;
  readonly bias: ((i: number) => number) | undefined;
  readonly deqSrc: ReturnType<typeof dequantizer>;
  readonly deqWei: ReturnType<typeof dequantizer>;
  readonly ep: Epilogue;
}

function prepare(p: MatmulProblem, a: MatmulArgs): Prepared {
  const f = p.fusion;
  const binary = a.binary.map((m, i) => ({ read: elementReader(f.binary[i].md.dataType, m.values) }));
  const ep = makeEpilogue(p.attr.postOps.entries, f, binary, quantView(f.scales.dst, a.scales.dst), quantView(f.zeroPoints.dst, a.zeroPoints.dst));
  return {
    src: elementReader(p.src.dataType, a.src.values),
    wei: elementReader(p.weights.dataType, a.weights.values),
    dstR: elementReader(p.dst.dataType, a.dst.values),
    dstW: elementWriter(p.dst.dataType, a.dst.values),
    bias: a.bias ? elementReader(a.bias.desc.dataType, a.bias.values) : undefined,
    deqSrc: quantViews(f, a.scales, a.zeroPoints, 'src'),
    deqWei: quantViews(f, a.scales, a.zeroPoints, 'weights'),
    ep,
  };
}

/**
 * The glu_backward post-op (rfcs/0002 section 10) on one dst row: `col(n)` is the GEMM's f32 column n
 * (the diff of the GLU output), `write(c, x)` stores dst column c of the row. Float64 math, f32 stores;
 * dprob gets the row's float64 sum once.
 */
type GluBackwardRow = (row: number, g: number, col: (c: number) => number, write: (c: number, x: number) => void) => void;

function gluBackwardRows(p: MatmulProblem, a: MatmulArgs): GluBackwardRow | undefined {
  const gb = p.fusion.gluBackward;
  if (!gb || !a.gluBackward) return undefined;
  const { alg, layout, alpha, limit } = gb.op;
  const h = elementReader(gb.src.dataType, a.gluBackward.src.values);
  const ld = gb.src.strides[0], N = p.N;
  const prob = a.gluBackward.prob?.values as Float32Array | undefined;
  const dprob = a.gluBackward.diffProb?.values as Float32Array | undefined;
  const ga = a.gluBackward.alpha?.values as Float32Array | undefined, gbeta = a.gluBackward.beta?.values as Float32Array | undefined;
  const g: GluGrad = { dGate: 0, dUp: 0, term: 0 };
  return (row, e, col, write) => {
    const pr = prob ? prob[row] : 1;
    // cuDNN's per-group scales: the GEMM result times alpha^2, the saved gate / up times beta.
    const a2 = ga ? ga[e] * ga[e] : 1, b = gbeta ? gbeta[e] : 1;
    let sum = 0;
    for (let n = 0; n < N; n++) {
      const [gc, uc] = gluBackwardColumns(layout, N, n);
      gluBackwardScalar(alg, b * h(row * ld + gc), b * h(row * ld + uc), a2 * col(n), pr, alpha, limit, g);
      write(gc, g.dGate);
      write(uc, g.dUp);
      sum += g.term;
    }
    if (dprob) dprob[row] = Math.fround(dprob[row] + sum);
  };
}

function runRef(p: MatmulProblem, a: MatmulArgs): void {
  if (p.kind === 'grouped_m') return refGroupedM(p, a);
  if (p.kind === 'grouped_k') return refGroupedK(p, a);
  return refDense(p, a);
}

/** The expert of each group: `ARG.MOE_EXPERT_MAP` (checked like the kernel's load_groups), or g itself. */
function groupExperts(p: MatmulProblem, a: MatmulArgs): Int32Array {
  if (!a.expertMap) return Int32Array.from({ length: p.G }, (_, g) => g);
  const map = Int32Array.from((a.expertMap.values as Int32Array).subarray(0, p.G));
  map.forEach((e, g) => {
    if (e < 0 || e >= p.moe.experts) throw rowMapsError(p, ROW_ERR.expertMap, g, e, p.moe.experts);
  });
  return map;
}

/** attr.setZeroFillUngroupedRows: dst rows [0, offs[0]) and [offs[G], M) become 0. */
function zeroUngroupedRows(p: MatmulProblem, a: MatmulArgs, offs: Int32Array): void {
  const write = elementWriter(p.dst.dataType, a.dst.values);
  const [ds0, ds1] = p.dst.strides;
  for (const [r0, r1] of [[0, offs[0]], [offs[p.G], p.M]]) {
    for (let r = r0; r < r1; r++) for (let n = 0; n < p.dstN; n++) write(r * ds0 + n * ds1, 0);
  }
}

function refGroupedM(p: MatmulProblem, a: MatmulArgs): void {
  const offs = checkedOffsets(groupingOf(p, a));
  const expertOf = groupExperts(p, a);
  checkRowMaps(p, a, offs[p.G]);
  if (p.moe.zeroFill) zeroUngroupedRows(p, a, offs);
  // MoE row maps: src row (gather: the token; -1 = padding, zeros) and dst row (scatter: token * topK + slot).
  const ti = a.tokenIndex?.values as Int32Array | undefined, ks = a.tokenKs?.values as Int32Array | undefined;
  const srcRow = (row: number): number => (p.moe.gather ? ti![row] : row);
  const dstRow = (row: number): number => (!p.moe.scatterTopK ? row : ti![row] < 0 ? -1 : ti![row] * p.moe.scatterTopK + ks![row]);
  const { K, N, dstN } = p;
  const [ss0, ss1] = p.src.strides;
  const [ws0, ws1, ws2] = p.weights.strides;
  const [ds0, ds1] = p.dst.strides;
  const r = prepare(p, a);
  const gbw = gluBackwardRows(p, a);
  const i2 = [0, 0], i3 = [0, 0, 0];
  for (let grp = 0; grp < p.G; grp++) {
    // What has one entry per expert (weights, bias, weights scales / zero points, glu_backward alpha /
    // beta) follows the group's expert e; what has one per group (src / dst scales and zero points,
    // binary src1 [G, ...]) stays at the group: the `g` of the index maps is grp.
    const r0 = offs[grp], rows = offs[grp + 1] - r0, e = expertOf[grp];
    if (rows === 0) continue;
    const W = new Float64Array(K * N);
    for (let k = 0; k < K; k++) {
      for (let c = 0; c < N; c++) {
        i3[0] = e; i3[1] = k; i3[2] = c;
        W[k * N + c] = r.deqWei(r.wei(e * ws0 + k * ws1 + c * ws2), grp, i3);
      }
    }
    const A = new Float64Array(rows * K);
    for (let m = 0; m < rows; m++) {
      const sr = srcRow(r0 + m);
      if (sr < 0) continue; // a gather's padding row: its dequantized src is 0
      for (let k = 0; k < K; k++) {
        i2[0] = sr; i2[1] = k;
        A[m * K + k] = r.deqSrc(r.src(sr * ss0 + k * ss1), grp, i2);
      }
    }
    const C = gemmF64(A, W, rows, K, N);
    for (let m = 0; m < rows; m++) {
      const row = dstRow(r0 + m);
      if (row < 0) continue; // a scatter's padding row is not written
      const col = (c: number): number => Math.fround(C[m * N + c] + (r.bias && p.bias ? r.bias(biasIndex(p.bias, [e, c])) : 0));
      if (gbw) {
        gbw(row, e, col, (c, x) => r.dstW(row * ds0 + c * ds1, x));
        continue;
      }
      for (let n = 0; n < dstN; n++) {
        const di = row * ds0 + n * ds1;
        i2[0] = row; i2[1] = n;
        r.dstW(di, r.ep.apply(r.ep.value(col, n, N), grp, i2, () => r.dstR(di)));
      }
    }
  }
}

function refGroupedK(p: MatmulProblem, a: MatmulArgs): void {
  const offs = checkedOffsets(groupingOf(p, a));
  const { M, N, dstN } = p;
  const [ss0, ss1] = p.src.strides;
  const [ws0, ws1] = p.weights.strides;
  const [ds0, ds1, ds2] = p.dst.strides;
  const r = prepare(p, a);
  const i2 = [0, 0], i3 = [0, 0, 0];
  for (let g = 0; g < p.G; g++) {
    const k0 = offs[g], kn = offs[g + 1] - k0;
    const A = new Float64Array(M * kn);
    for (let m = 0; m < M; m++) {
      for (let kk = 0; kk < kn; kk++) {
        i2[0] = m; i2[1] = k0 + kk;
        A[m * kn + kk] = r.deqSrc(r.src(m * ss0 + (k0 + kk) * ss1), g, i2);
      }
    }
    const W = new Float64Array(kn * N);
    for (let kk = 0; kk < kn; kk++) {
      for (let c = 0; c < N; c++) {
        i2[0] = k0 + kk; i2[1] = c;
        W[kk * N + c] = r.deqWei(r.wei((k0 + kk) * ws0 + c * ws1), g, i2);
      }
    }
    const C = gemmF64(A, W, M, kn, N);
    for (let m = 0; m < M; m++) {
      const col = (c: number): number => Math.fround(C[m * N + c] + (r.bias && p.bias ? r.bias(biasIndex(p.bias, [g, m, c])) : 0));
      for (let n = 0; n < dstN; n++) {
        const di = g * ds0 + m * ds1 + n * ds2;
        i3[0] = g; i3[1] = m; i3[2] = n;
        r.dstW(di, r.ep.apply(r.ep.value(col, n, N), g, i3, () => r.dstR(di)));
      }
    }
  }
}

function refDense(p: MatmulProblem, a: MatmulArgs): void {
  const nb = p.batch.length;
  const { M, K, N, dstN } = p;
  const ss = p.src.strides, ws = p.weights.strides, ds = p.dst.strides;
  const r = prepare(p, a);
  const gbw = gluBackwardRows(p, a);
  const batches = p.batch.reduce((x, y) => x * y, 1);
  const counts = p.moe.batchedCounts ? checkedCounts(p, a, batches) : undefined;
  const idx = new Array<number>(nb + 2).fill(0);
  const sIdx = new Array<number>(nb + 2).fill(0), wIdx = new Array<number>(nb + 2).fill(0);
  for (let b = 0; b < batches; b++) {
    let rem = b, sOff = 0, wOff = 0, dOff = 0;
    for (let d = nb - 1; d >= 0; d--) {
      const i = rem % p.batch[d];
      rem = Math.floor(rem / p.batch[d]);
      idx[d] = i;
      sIdx[d] = p.src.dims[d] !== 1 ? i : 0;
      wIdx[d] = p.weights.dims[d] !== 1 ? i : 0;
      sOff += sIdx[d] * ss[d];
      wOff += wIdx[d] * ws[d];
      dOff += i * ds[d];
    }
    const A = new Float64Array(M * K);
    for (let m = 0; m < M; m++) {
      for (let k = 0; k < K; k++) {
        sIdx[nb] = m; sIdx[nb + 1] = k;
        A[m * K + k] = r.deqSrc(r.src(sOff + m * ss[nb] + k * ss[nb + 1]), 0, sIdx);
      }
    }
    const W = new Float64Array(K * N);
    for (let k = 0; k < K; k++) {
      for (let c = 0; c < N; c++) {
        wIdx[nb] = k; wIdx[nb + 1] = c;
        W[k * N + c] = r.deqWei(r.wei(wOff + k * ws[nb] + c * ws[nb + 1]), 0, wIdx);
      }
    }
    const C = gemmF64(A, W, M, K, N);
    const valid = counts ? counts[b] : M; // batched format: rows past the count are never written
    for (let m = 0; m < valid; m++) {
      idx[nb] = m;
      const col = (c: number): number => {
        if (!r.bias || !p.bias) return Math.fround(C[m * N + c]);
        idx[nb + 1] = c;
        return Math.fround(C[m * N + c] + r.bias(biasIndex(p.bias, idx)));
      };
      if (gbw) { // 2D only (the pd rejects batched glu_backward)
        gbw(m, 0, col, (c, x) => r.dstW(dOff + m * ds[nb] + c * ds[nb + 1], x));
        continue;
      }
      for (let n = 0; n < dstN; n++) {
        const di = dOff + m * ds[nb] + n * ds[nb + 1];
        const v = r.ep.value(col, n, N);
        idx[nb + 1] = n;
        r.dstW(di, r.ep.apply(v, 0, idx, () => r.dstR(di)));
      }
    }
  }
}
