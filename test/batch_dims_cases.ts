/**
 * Dense matmul with more than one batch dim (4D / 5D, numpy broadcast of size-1 batch dims): the cases
 * and a runner shared by the cpu (matmul_batch_dims.test.ts) and gpu (gpu_matmul_batch_dims.test.ts)
 * tests. Results are checked against the float64 reference (reference.ts refDense) plus a binary
 * src1 applied in float64 here; dst elements outside the logical tensor must stay untouched.
 */
import { expect } from 'vitest';
import { ARG, Memory, PrimitiveAttr, dt, matmul, memory, type DataType, type Engine, type GpuEngine, type MemoryDesc, type Stream } from '../src/index.js';
import { assertClose, refDense, type RefPostOp } from './reference.js';
import { attrFor, exactValues, physicalIndices, randomFor, toleranceFor } from './helpers.js';
import { mulberry32 } from './workloads.js';

export interface BatchCase {
  readonly name: string;
  readonly src: readonly number[];
  readonly wei: readonly number[];
  /** Tags (default row-major). */
  readonly srcTag?: string;
  readonly weiTag?: string;
  readonly dstTag?: string;
  readonly bias?: readonly number[];
  readonly postOps?: readonly RefPostOp[];
  /** binary_add / binary_mul src1 dims (dst's rank, each equal to dst's or 1), after the eltwise post-ops. */
  readonly binary?: { readonly alg: 'binary_add' | 'binary_mul'; readonly dims: readonly number[] };
  readonly dt?: DataType;
  /** src, weights, dst types where they differ (default: `dt` for all three). */
  readonly types?: readonly [DataType, DataType, DataType];
  /** f32 weights scales over the weights dims of this mask (oneDNN: bit i = dim i), folded into the reference's weights. */
  readonly weiScalesMask?: number;
}

const rowMajor = (n: number): string => 'abcdefghijkl'.slice(0, n);
const count = (d: readonly number[]): number => d.reduce((a, b) => a * b, 1);
const SENTINEL = 9.25;

/** Broadcast index of dst coordinate `idx` into a tensor of `dims` (row-major logical). */
function bcastIndex(dims: readonly number[], idx: readonly number[]): number {
  let off = 0;
  for (let d = 0; d < dims.length; d++) off = off * dims[d] + (dims[d] === 1 ? 0 : idx[d]);
  return off;
}

async function writePhysical(m: Memory | ReturnType<typeof Memory.create>, md: MemoryDesc, logical: ArrayLike<number>, pad: number): Promise<void> {
  const span = new Float64Array(md.spanElems).fill(pad);
  physicalIndices(md.dims, md.strides).forEach((p, i) => { span[p] = logical[i]; });
  m.write(span);
}

export async function runBatchCase(eng: Engine | GpuEngine, strm: Stream, c: BatchCase): Promise<{ implInfo: string; got: Float64Array }> {
  const rng = mulberry32(7);
  const nd = c.src.length;
  const t = c.dt ?? dt.f32;
  const [st, wt, dstT] = c.types ?? [t, t, t];
  const batch = c.src.slice(0, nd - 2).map((b, i) => (b === 1 ? c.wei[i] : b));
  const dstDims = [...batch, c.src[nd - 2], c.wei[nd - 1]];
  const srcMd = memory.desc(c.src, st, c.srcTag ?? rowMajor(nd));
  const weiMd = memory.desc(c.wei, wt, c.weiTag ?? rowMajor(nd));
  const dstMd = memory.desc(dstDims, dstT, c.dstTag ?? rowMajor(nd));
  const biasMd = c.bias ? memory.desc(c.bias, dt.f32, rowMajor(nd)) : undefined;
  const attr = attrFor(c.postOps);
  const s1Md = c.binary ? memory.desc(c.binary.dims, dt.f32, rowMajor(nd)) : undefined;
  if (c.binary) attr.postOps.appendBinary(c.binary.alg, s1Md!);
  if (c.weiScalesMask !== undefined) attr.setScales(ARG.WEIGHTS, c.weiScalesMask);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);
  // Integer tensors hold small integers (randomFor's values are float-exact, not integers).
  const values = (d: DataType, n: number): Float64Array => (d === 's8' || d === 'u8' ? Float64Array.from(randomFor(dt.f32, rng, n), (v) => Math.round(v * 4) + (d === 'u8' ? 8 : 0)) : randomFor(d, rng, n));
  const x = values(st, count(c.src)), w = values(wt, count(c.wei));
  const b = c.bias ? randomFor(dt.f32, rng, count(c.bias)) : undefined;
  const s1 = c.binary ? randomFor(dt.f32, rng, count(c.binary.dims)) : undefined;
  const scDims = c.weiScalesMask === undefined ? undefined : c.wei.map((d, i) => ((c.weiScalesMask! >> i) & 1 ? d : 1));
  const sc = scDims ? randomFor(dt.f32, rng, count(scDims)) : undefined;
  const mems: Memory[] = [];
  const mk = async (md: MemoryDesc, v: ArrayLike<number>, pad = 0): Promise<Memory> => {
    const m = Memory.create(md, eng as Engine);
    mems.push(m);
    await writePhysical(m, md, v, pad);
    return m;
  };
  try {
    const args: Record<number, Memory> = { [ARG.SRC]: await mk(srcMd, x), [ARG.WEIGHTS]: await mk(weiMd, w) };
    const dst = await mk(dstMd, new Float64Array(count(dstDims)).fill(SENTINEL), SENTINEL);
    args[ARG.DST] = dst;
    if (biasMd) args[ARG.BIAS] = await mk(biasMd, b!);
    if (s1Md) args[ARG.ATTR_MULTIPLE_POST_OP(attr.postOps.entries.length - 1) | ARG.SRC_1] = await mk(s1Md, s1!);
    if (sc) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = await mk(pd.queryMd('scales:weights')!, sc);
    prim.execute(strm, args);
    await strm.wait();
    const span = await dst.read();
    const got = Float64Array.from(physicalIndices(dstDims, dstMd.strides), (p) => span[p]);
    // Padding between the logical elements keeps the sentinel.
    const inside = new Set(physicalIndices(dstDims, dstMd.strides));
    for (let i = 0; i < span.length; i++) if (!inside.has(i)) expect(span[i], `${c.name}: dst padding element ${i}`).toBe(SENTINEL);
    const ref = refDense(x, c.src, scDims ? scaled(w, c.wei, scDims, sc!) : w, c.wei, { bias: b && { dims: [...c.bias!], data: b }, postOps: c.postOps });
    if (c.binary) applyBinary(ref, dstDims, c.binary, s1!);
    assertClose(got, ref, toleranceFor(dstT), c.name);
    return { implInfo: pd.implInfo, got };
  } finally {
    mems.forEach((m) => m.free());
  }
}

/** Weights times their scales (broadcast over the dims the mask leaves out), in float64. */
function scaled(w: Float64Array, dims: readonly number[], scDims: readonly number[], sc: Float64Array): Float64Array {
  const idx = new Array<number>(dims.length).fill(0);
  return w.map((v, i) => {
    let rem = i;
    for (let d = dims.length - 1; d >= 0; d--) { idx[d] = rem % dims[d]; rem = Math.floor(rem / dims[d]); }
    return v * sc[bcastIndex(scDims, idx)];
  });
}

function applyBinary(ref: { value: Float64Array; mag: Float64Array }, dims: readonly number[], op: NonNullable<BatchCase['binary']>, s1: Float64Array): void {
  const idx = new Array<number>(dims.length).fill(0);
  for (let i = 0; i < ref.value.length; i++) {
    let rem = i;
    for (let d = dims.length - 1; d >= 0; d--) { idx[d] = rem % dims[d]; rem = Math.floor(rem / dims[d]); }
    const v = s1[bcastIndex(op.dims, idx)];
    if (op.alg === 'binary_add') { ref.value[i] += v; ref.mag[i] += Math.abs(v); } else { ref.value[i] *= v; ref.mag[i] *= Math.abs(v); }
  }
}

/** The cases both engines run (small: the gpu tests compile each kernel on SwiftShader). */
export const BATCH_CASES: readonly BatchCase[] = [
  { name: '4D, K and N not multiples of the tile', src: [2, 3, 5, 7], wei: [2, 3, 7, 9] },
  { name: '5D', src: [2, 2, 3, 4, 6], wei: [2, 2, 3, 6, 5] },
  { name: '4D, more rows than a tile', src: [2, 2, 37, 19], wei: [2, 2, 19, 21] },
  { name: 'src broadcast on batch dim 0', src: [1, 3, 5, 7], wei: [2, 3, 7, 9] },
  { name: 'src broadcast on batch dim 1', src: [2, 1, 5, 7], wei: [2, 3, 7, 9] },
  { name: 'src broadcast on both batch dims', src: [1, 1, 5, 7], wei: [2, 3, 7, 9] },
  { name: 'weights broadcast on batch dim 0', src: [2, 3, 5, 7], wei: [1, 3, 7, 9] },
  { name: 'weights broadcast on batch dim 1', src: [2, 3, 5, 7], wei: [2, 1, 7, 9] },
  { name: 'weights broadcast on both batch dims', src: [2, 3, 5, 7], wei: [1, 1, 7, 9] },
  { name: 'src and weights broadcast on different dims', src: [2, 1, 5, 7], wei: [1, 3, 7, 4] },
  { name: '5D, broadcast in the middle', src: [2, 1, 2, 3, 4], wei: [2, 3, 2, 4, 6] },
  { name: 'a batch dim of 1', src: [2, 1, 5, 7], wei: [2, 1, 7, 9] },
  { name: 'every batch dim 1', src: [1, 1, 5, 7], wei: [1, 1, 7, 9] },
  { name: 'bias [1, 1, 1, N] + relu + linear', src: [2, 3, 5, 7], wei: [2, 3, 7, 9], bias: [1, 1, 1, 9], postOps: [{ kind: 'relu', alpha: 0.5 }, { kind: 'linear', alpha: 2, beta: -1 }] },
  { name: 'bias per batch [2, 3, 1, N]', src: [2, 3, 5, 7], wei: [2, 3, 7, 9], bias: [2, 3, 1, 9] },
  { name: 'bias [1, 3, 1, N] with src broadcast on dim 1', src: [2, 1, 5, 7], wei: [2, 3, 7, 9], bias: [1, 3, 1, 9] },
  { name: 'binary add src1 [B1, B2, M, N]', src: [2, 3, 5, 7], wei: [2, 3, 7, 9], binary: { alg: 'binary_add', dims: [2, 3, 5, 9] } },
  { name: 'binary mul src1 [1, 1, M, N] after relu, weights broadcast on dim 0', src: [2, 3, 5, 7], wei: [1, 3, 7, 9], postOps: [{ kind: 'relu', alpha: 0 }], binary: { alg: 'binary_mul', dims: [1, 1, 5, 9] } },
  { name: 'binary add src1 [2, 1, 1, N] with src broadcast on dim 0', src: [1, 3, 5, 7], wei: [2, 3, 7, 9], binary: { alg: 'binary_add', dims: [2, 1, 1, 9] } },
  { name: 'bias [2, 1, 1, N] that moves with the launches', src: [2, 1, 5, 7], wei: [2, 3, 7, 9], bias: [2, 1, 1, 9] },
  { name: 'weights scales per (batch dim 0, N) with launches over dim 0', src: [2, 1, 5, 7], wei: [2, 3, 7, 9], weiScalesMask: 0b1001 },
  { name: 'weights scales per (batch dims, N), one launch', src: [2, 3, 5, 7], wei: [2, 3, 7, 9], weiScalesMask: 0b1011, bias: [1, 1, 1, 9] },
  { name: 'binary add src1 [2, 1, M, N] that moves with the launches, relu', src: [2, 1, 5, 7], wei: [2, 3, 7, 9], postOps: [{ kind: 'relu', alpha: 0 }], binary: { alg: 'binary_add', dims: [2, 1, 5, 9] } },
  { name: 'transposed weights (abdc)', src: [2, 3, 5, 7], wei: [2, 3, 7, 9], weiTag: 'abdc' },
  { name: 'batch dims swapped in src (bacd): two launches', src: [2, 3, 5, 7], wei: [2, 3, 7, 9], srcTag: 'bacd' },
  { name: 'batch dims swapped in dst (bacd)', src: [2, 3, 5, 7], wei: [2, 3, 7, 9], dstTag: 'bacd' },
  { name: 's8 x s8 -> f32, weights broadcast on dim 1 (launches)', src: [2, 3, 5, 8], wei: [2, 1, 8, 6], types: [dt.s8, dt.s8, dt.f32], bias: [1, 1, 1, 6] },
  { name: 'f32 x u8 -> f16, per-(batch, N) weights scales, src broadcast on dim 0', src: [1, 3, 5, 8], wei: [2, 3, 8, 6], types: [dt.f32, dt.u8, dt.f16], weiScalesMask: 0b1001 },
  { name: 'bf16', src: [2, 2, 5, 12], wei: [2, 2, 12, 10], dt: dt.bf16 },
];

/**
 * The dst values of a plain run of src x weights (values `exactValues`, the weights given logically
 * row-major), with `attr` from `withAttr` (its GLU halves dst's N): for bit comparisons of a 4D+
 * matmul with the 3D matmuls it stands for.
 */
export async function runPlain(eng: Engine | GpuEngine, strm: Stream, src: readonly number[], wei: readonly number[], x: Float64Array, w: Float64Array,
  withAttr: (a: PrimitiveAttr) => void): Promise<Float64Array> {
  const nd = src.length;
  const attr = new PrimitiveAttr();
  withAttr(attr);
  const glu = attr.postOps.glu !== undefined;
  const dstDims = [...src.slice(0, nd - 2).map((b, i) => (b === 1 ? wei[i] : b)), src[nd - 2], glu ? wei[nd - 1] / 2 : wei[nd - 1]];
  const md = (d: readonly number[]): MemoryDesc => memory.desc(d, dt.f32, rowMajor(nd));
  const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, md(src), md(wei), md(dstDims), attr));
  const mems = [Memory.create(md(src), eng as Engine).write(x), Memory.create(md(wei), eng as Engine).write(w), Memory.create(md(dstDims), eng as Engine)];
  try {
    prim.execute(strm, { [ARG.SRC]: mems[0], [ARG.WEIGHTS]: mems[1], [ARG.DST]: mems[2] });
    await strm.wait();
    return Float64Array.from(await mems[2].read());
  } finally {
    mems.forEach((m) => m.free());
  }
}

/** 4D GLU matmuls (one collapsed batch; weights broadcast on dim 0: two launches) against the 3D matmuls they stand for, bit for bit. */
export async function expectGluBitsOf3D(eng: Engine | GpuEngine, strm: Stream): Promise<void> {
  const M = 5, K = 12, N = 16;
  const glu = (a: PrimitiveAttr): void => { a.postOps.appendGlu('glu_swiglu', 'halves'); };
  const x = exactValues(2 * 3 * M * K, 11), w = exactValues(2 * 3 * K * N, 12);
  const four = await runPlain(eng, strm, [2, 3, M, K], [2, 3, K, N], x, w, glu);
  expect(Array.from(four)).toEqual(Array.from(await runPlain(eng, strm, [6, M, K], [6, K, N], x, w, glu)));
  const bcast = await runPlain(eng, strm, [2, 3, M, K], [1, 3, K, N], x, w.subarray(0, 3 * K * N), glu);
  const per = 3 * M * (N / 2);
  for (let b0 = 0; b0 < 2; b0++) {
    const three = await runPlain(eng, strm, [3, M, K], [3, K, N], x.subarray(b0 * 3 * M * K, (b0 + 1) * 3 * M * K), w.subarray(0, 3 * K * N), glu);
    expect(Array.from(bcast.subarray(b0 * per, (b0 + 1) * per))).toEqual(Array.from(three));
  }
}
