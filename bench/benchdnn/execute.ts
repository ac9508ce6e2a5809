/**
 * Runs one problem: shape and plan, the primitive descriptor (its DnnlError decides UNIMPLEMENTED /
 * INVALID_ARGUMENTS), memories filled with exact data, execution, then the comparison with the
 * float64 reference (mode C), the timing (mode P) or nothing (mode R).
 */
import { ARG, DnnlError, Memory, Stream, matmul, memory, reorder, type Engine, type MemoryDesc } from '../../src/index.js';
import { compare } from './compare.js';
import { dataRange, fillInts, fillScales, seedOf, zeroPointRange } from './fill.js';
import { readLogical, writeGroupEnds, writeLogical } from './memory_io.js';
import { measure, type PerfResult } from './perf.js';
import { ProblemRejection, shapeOf, type Problem, type Shape } from './problem.js';
import { referenceMatmul, type RefArgQuant, type RefPostOp, type RefQuant } from './reference.js';
import { ARG_ID, planOf, type Plan } from './setup.js';
import type { GlobalSettings } from './settings.js';

export type State = 'PASSED' | 'MISTRUSTED' | 'FAILED' | 'UNIMPLEMENTED' | 'INVALID_ARGUMENTS' | 'EXECUTED' | 'LISTED';

export interface Outcome {
  readonly state: State;
  readonly reason?: string;
  readonly errors?: number;
  readonly total?: number;
  readonly worst?: { readonly index: number; readonly expected: number; readonly got: number };
  readonly impl?: string;
  readonly perf?: PerfResult;
  readonly shape?: Shape;
}

export interface RunContext {
  readonly engine: () => Promise<Engine>;
  readonly globals: GlobalSettings;
  /** Seeds the data (the repro line: the same problem always gets the same data). */
  readonly seed: string;
  /** Test hook: changes the library's dst before the comparison (a wrong library must FAIL). */
  readonly perturb?: (dst: Float64Array) => void;
}

/** benchdnn treats a result with more zeros than this as mistrusted (matmul's zero-trust percent). */
const ZERO_TRUST = 0.9;

function rejection(e: unknown): Outcome {
  if (e instanceof ProblemRejection) return { state: e.status === 'unimplemented' ? 'UNIMPLEMENTED' : 'INVALID_ARGUMENTS', reason: e.message };
  if (e instanceof DnnlError && (e.status === 'unimplemented' || e.status === 'invalid_arguments')) {
    return { state: e.status === 'unimplemented' ? 'UNIMPLEMENTED' : 'INVALID_ARGUMENTS', reason: e.message.replace(/^(unimplemented|invalid_arguments): /, '') };
  }
  throw e;
}

const count = (dims: readonly number[]): number => dims.reduce((a, b) => a * b, 1);
const QUERY_ARG = { src: 'src', wei: 'weights', dst: 'dst' } as const;

export async function runProblem(p: Problem, ctx: RunContext): Promise<Outcome> {
  let shape: Shape, plan: Plan, pd: matmul.PrimitiveDesc, eng: Engine;
  try {
    shape = shapeOf(p);
    if (ctx.globals.mode === 'L') return { state: 'LISTED', shape };
    eng = await ctx.engine();
    plan = planOf(p, shape);
    pd = plan.bias
      ? new matmul.PrimitiveDesc(eng, plan.srcMd, plan.weiMd, plan.bias.md, plan.dstMd, plan.attr)
      : new matmul.PrimitiveDesc(eng, plan.srcMd, plan.weiMd, plan.dstMd, plan.attr);
  } catch (e) {
    return rejection(e);
  }
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, handles?: readonly (number | undefined)[]): Memory => {
    const m = Memory.create(md, eng, handles);
    mems.push(m);
    return m;
  };
  const seed = (what: string): number => seedOf(ctx.seed, what);
  const [sdt, wdt, ddt] = p.dt;
  const strm = new Stream(eng);
  let prim: matmul.Primitive | undefined;
  try {
    const args: Record<number, Memory> = {};
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
    const quantMems = new Map<string, Memory>();
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
      const r: Record<number, Memory> = { [ARG.FROM]: user, [ARG.TO]: wei };
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
      let vals = fillInts(count(b.dims), b.alg === 'mul' ? [-2, 2] : [-4, 4], seed(`binary:${b.position}`));
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

    prim = new matmul.Primitive(pd);
    const run = async (): Promise<void> => {
      prim!.execute(strm, args);
      await strm.wait();
    };
    try {
      await run();
    } catch (e) {
      if (e instanceof DnnlError) return { state: 'FAILED', reason: `execution: ${e.message}`, impl: pd.implInfo, shape };
      throw e;
    }
    if (ctx.globals.mode === 'R') return { state: 'EXECUTED', impl: pd.implInfo, shape };
    if (ctx.globals.mode === 'P') return { state: 'EXECUTED', impl: pd.implInfo, shape, perf: await measure(run, ctx.globals) };

    const got = await readLogical(dst);
    ctx.perturb?.(got);
    const refQuant = (arg: 'src' | 'wei' | 'dst'): RefArgQuant => {
      const one = (kind: 'scales' | 'zero_points'): RefQuant | undefined => {
        const q = plan.quant.find((x) => x.arg === arg && x.kind === kind);
        return q && { values: quantVals.get(`${kind}:${arg}`)!, mask: q.mask, groups: q.groups, dims: q.dims, perGroup: q.perGroup };
      };
      return { scales: one('scales'), zeroPoints: one('zero_points') };
    };
    const ref = referenceMatmul({
      shape, src: srcVals, wei: weiVals,
      bias: plan.bias && biasVals ? { values: biasVals, dims: plan.bias.dims } : undefined,
      quant: { src: refQuant('src'), wei: refQuant('wei'), dst: refQuant('dst') },
      postOps: refPostOps, dstBefore,
    });
    const c = compare(got, ref, ddt, plan.transcendental);
    const base = { errors: c.errors, total: c.total, worst: c.worst, impl: pd.implInfo, shape };
    if (c.errors > 0) return { state: 'FAILED', ...base };
    return { state: c.total > 0 && c.zeroRatio > ZERO_TRUST ? 'MISTRUSTED' : 'PASSED', ...base };
  } finally {
    prim?.destroy();
    mems.forEach((m) => m.free());
  }
}
