/**
 * Creates and fills every memory a problem's primitive takes (src with the group offsets every grouped
 * tensor shares, weights, reordered when the pd chose a packed layout, scales / zero points, bias,
 * dst, binary post-op inputs) and returns them with the same values, in logical order, for the
 * reference.
 */
import { ARG, memory, reorder, type MemoryDesc, type Stream, type matmul } from '../../src/index.js';
import type { AnyEngine, AnyHandles, AnyMemory } from './engine.js';
import { dataRange, fillInts, fillScales, zeroPointRange } from './fill.js';
import { writeGroupEnds, writeLogical } from './memory_io.js';
import type { Problem, Shape } from './problem.js';
import type { RefArgQuant, RefInputs, RefPostOp, RefQuant } from './reference.js';
import { ARG_ID, type Plan } from './setup.js';

export interface Bound {
  readonly args: Record<number, AnyMemory>;
  readonly dst: AnyMemory;
  /** The same inputs for the reference. */
  readonly inputs: RefInputs;
}

const count = (dims: readonly number[]): number => dims.reduce((a, b) => a * b, 1);
const QUERY_ARG = { src: 'src', wei: 'weights', dst: 'dst' } as const;

/**
 * `mk` creates a memory the caller frees; `seed(name)` seeds each tensor's values. Executes the
 * weights reorder on `strm` when needed.
 */
export async function bindArguments(
  p: Problem, shape: Shape, plan: Plan, pd: matmul.PrimitiveDesc, eng: AnyEngine, strm: Stream,
  mk: (md: MemoryDesc, handles?: AnyHandles) => AnyMemory, seed: (what: string) => number,
): Promise<Bound> {
  const [sdt, wdt, ddt] = p.dt;
  const args: Record<number, AnyMemory> = {};
  // src (and the offsets every grouped tensor of the problem shares)
  const src = mk(pd.queryMd('src')!);
  const sharedOffsets = shape.kind !== 'dense' ? [undefined, src.handles[1]] : undefined;
  if (shape.kind !== 'dense') {
    let end = 0;
    await writeGroupEnds(src, shape.sizes.map((s) => (end += s)));
  }
  const srcDims = shape.kind === 'dense' ? shape.src : [shape.M, shape.K];
  const srcVals = fillInts(count(srcDims), dataRange(sdt), seed('src'));
  await writeLogical(src, srcVals);
  args[ARG.SRC] = src;

  // scales / zero points
  const quantVals = new Map<string, Float64Array>();
  const quantMems = new Map<string, AnyMemory>();
  for (const q of plan.quant) {
    const md = pd.queryMd(`${q.kind}:${QUERY_ARG[q.arg]}`)!;
    const n = count(md.dims);
    const vals = q.common !== undefined ? new Float64Array(n).fill(q.common)
      : q.kind === 'scales' ? fillScales(n, seed(`${q.kind}:${q.arg}`)) : fillInts(n, zeroPointRange(q.dataType), seed(`${q.kind}:${q.arg}`));
    const m = mk(md);
    await writeLogical(m, vals);
    quantVals.set(`${q.kind}:${q.arg}`, vals);
    quantMems.set(`${q.kind}:${q.arg}`, m);
  }

  // weights: plain as given, or reordered into the layout the pd chose for `any`
  const weiMd = pd.queryMd('weights')!;
  const weiDims = shape.kind === 'dense' ? shape.wei : shape.kind === 'grouped_m' ? [shape.G, shape.K, shape.N] : [shape.K, shape.N];
  const weiVals = fillInts(count(weiDims), dataRange(wdt), seed('wei'));
  const embedded = weiMd.packed?.quant;
  if (weiMd.format === 'packed') {
    const user = mk(memory.desc([...weiDims], wdt, 'abcdefghijkl'.slice(0, weiDims.length)));
    await writeLogical(user, weiVals);
    const wei = mk(weiMd);
    const r: Record<number, AnyMemory> = { [ARG.FROM]: user, [ARG.TO]: wei };
    if (embedded?.scales) r[ARG.ATTR_SCALES | ARG.WEIGHTS] = quantMems.get('scales:wei')!;
    if (embedded?.zeroPoints) r[ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS] = quantMems.get('zero_points:wei')!;
    const rp = new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, weiMd));
    rp.execute(strm, r);
    await strm.wait();
    rp.destroy();
    args[ARG.WEIGHTS] = wei;
  } else {
    const wei = mk(weiMd, shape.kind === 'grouped_k' ? sharedOffsets : undefined);
    await writeLogical(wei, weiVals);
    args[ARG.WEIGHTS] = wei;
  }
  for (const q of plan.quant) {
    const m = quantMems.get(`${q.kind}:${q.arg}`)!;
    const stored = q.arg === 'wei' && (q.kind === 'scales' ? embedded?.scales : embedded?.zeroPoints);
    if (!stored) args[(q.kind === 'scales' ? ARG.ATTR_SCALES : ARG.ATTR_ZERO_POINTS) | ARG_ID[q.arg]] = m;
  }

  // dst (prefilled when a sum post-op reads it), bias, binary post-op inputs
  const dst = mk(pd.queryMd('dst')!, shape.kind === 'grouped_m' ? sharedOffsets : undefined);
  const dstDims = shape.kind === 'dense' ? shape.dst : shape.kind === 'grouped_m' ? [shape.M, shape.N] : [shape.G, shape.M, shape.N];
  let dstBefore: Float64Array | undefined;
  if (plan.hasSum) {
    dstBefore = fillInts(count(dstDims), ddt === 'u8' ? [0, 4] : [-4, 4], seed('dst'));
    await writeLogical(dst, dstBefore);
  }
  args[ARG.DST] = dst;
  let biasVals: Float64Array | undefined;
  if (plan.bias) {
    const b = mk(pd.queryMd('bias')!);
    biasVals = fillInts(count(plan.bias.dims), [-8, 8], seed('bias'));
    await writeLogical(b, biasVals);
    args[ARG.BIAS] = b;
  }
  const refPostOps: RefPostOp[] = [];
  for (const op of plan.postOps) {
    if (op.kind !== 'binary') {
      refPostOps.push(op);
      continue;
    }
    const b = op.plan;
    const md = pd.queryMd(`binary:${b.position}`) ?? b.md;
    // Small integers, exact in every src1 type (an unsigned src1 takes none below 0).
    const unsigned = md.dataType === 'u8';
    let vals = fillInts(count(b.dims), b.alg === 'mul' ? [unsigned ? 0 : -2, 2] : [unsigned ? 0 : -4, 4], seed(`binary:${b.position}`));
    // A zero multiplier would zero whole groups: the result would prove little (MISTRUSTED).
    if (b.alg === 'mul') vals = vals.map((v) => v || 1);
    if (b.replicated) {
      const N = b.dims[1];
      vals = vals.map((_, i) => vals[i % N]);
    }
    const m = mk(md, md.isGrouped ? sharedOffsets : undefined);
    await writeLogical(m, vals);
    args[ARG.ATTR_MULTIPLE_POST_OP(b.position) | ARG.SRC_1] = m;
    refPostOps.push({ kind: 'binary', alg: b.alg, values: vals, dims: b.dims, byGroup: b.byGroup });
  }

  const refQuant = (arg: 'src' | 'wei' | 'dst'): RefArgQuant => {
    const one = (kind: 'scales' | 'zero_points'): RefQuant | undefined => {
      const q = plan.quant.find((x) => x.arg === arg && x.kind === kind);
      return q && { values: quantVals.get(`${kind}:${arg}`)!, mask: q.mask, groups: q.groups, dims: q.dims, perGroup: q.perGroup };
    };
    return { scales: one('scales'), zeroPoints: one('zero_points') };
  };
  const inputs: RefInputs = {
    shape, src: srcVals, wei: weiVals,
    bias: plan.bias && biasVals ? { values: biasVals, dims: plan.bias.dims } : undefined,
    quant: { src: refQuant('src'), wei: refQuant('wei'), dst: refQuant('dst') },
    postOps: refPostOps, dstBefore,
  };
  return { args, dst, inputs };
}
