/**
 * Runs one problem: shape and plan, the primitive descriptor (its DnnlError decides UNIMPLEMENTED /
 * INVALID_ARGUMENTS), memories filled with exact data, execution, then the comparison with the
 * float64 reference (mode C), the timing (mode P) or nothing (mode R).
 */
import { DnnlError, Stream, matmul, type MemoryDesc } from '../../src/index.js';
import { createMemory, type AnyEngine, type AnyHandles, type AnyMemory } from './engine.js';
import { bindArguments } from './bind.js';
import { compare } from './compare.js';
import { seedOf } from './fill.js';
import { readLogical } from './memory_io.js';
import { measure, type PerfResult } from './perf.js';
import { ProblemRejection, shapeOf, type Problem, type Shape } from './problem.js';
import { referenceMatmul } from './reference.js';
import { planOf, type Plan } from './setup.js';
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
  readonly engine: () => Promise<AnyEngine>;
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


export async function runProblem(p: Problem, ctx: RunContext): Promise<Outcome> {
  let shape: Shape, plan: Plan, pd: matmul.PrimitiveDesc, eng: AnyEngine;
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
  const mems: AnyMemory[] = [];
  const mk = (md: MemoryDesc, handles?: AnyHandles): AnyMemory => {
    const m = createMemory(md, eng, handles);
    mems.push(m);
    return m;
  };
  const seed = (what: string): number => seedOf(ctx.seed, what);
  const strm = new Stream(eng);
  let prim: matmul.Primitive | undefined;
  try {
    const { args, dst, inputs } = await bindArguments(p, shape, plan, pd, eng, strm, mk, seed);
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
    const ref = referenceMatmul(inputs);
    // exp / pow may pass f32's range mid-chain: Inf in f32 math, finite in the cpu reference impl's float64
    const wide = plan.transcendental ? referenceMatmul({ ...inputs, wideIntermediates: true }) : undefined;
    const c = compare(got, ref, p.dt[2], plan.transcendental, wide);
    const base = { errors: c.errors, total: c.total, worst: c.worst, impl: pd.implInfo, shape };
    if (c.errors > 0) return { state: 'FAILED', ...base };
    return { state: c.total > 0 && c.zeroRatio > ZERO_TRUST ? 'MISTRUSTED' : 'PASSED', ...base };
  } catch (e) {
    // Setting up the arguments (a weights reorder, allocation) failed: report it on this problem.
    if (!(e instanceof DnnlError)) throw e;
    if (e.status === 'unimplemented' || e.status === 'invalid_arguments') return rejection(e);
    return { state: 'FAILED', reason: e.message, impl: pd.implInfo, shape };
  } finally {
    prim?.destroy();
    mems.forEach((m) => m.free());
  }
}
