/**
 * Runners for the grouped matmul backward over the public API, for every proposal: P#1 grouped
 * memory, P#2 offsets attribute, P#3 per-expert memories.
 */
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm_backward_data, grouped_gemm_backward_weights,
  matmul_backward_data, matmul_backward_weights, memory, offsets, reorder, tag, type DataType,
} from '../src/index.js';
import { readLogical, writeLogical } from './helpers.js';
import { mulberry32, randomF32, randomLowPrecisionExact } from './workloads.js';

export type Proposal = 'p1' | 'p2' | 'p3';
export const SENTINEL = 777;

export interface BwdCase {
  readonly G: number;
  readonly K: number;
  readonly N: number;
  readonly sizes: readonly number[];
  /** Rows allocated (>= the routed rows; the rest must stay untouched). */
  readonly total?: number;
  readonly dt?: DataType;
  /** Weights for backward data: plain abc, plain acb, or tag.any (packed f32:p8t through a reorder). */
  readonly weights?: 'abc' | 'acb' | 'any';
  readonly bias?: boolean;
  /** Row strides of src / diff_dst / diff_src (padding between rows). */
  readonly ld?: number;
  readonly seed?: number;
}

export interface BwdInputs {
  readonly x: Float64Array;
  readonly w: Float64Array;
  readonly dy: Float64Array;
  readonly total: number;
  readonly dt: DataType;
}

export interface BwdResult {
  /** diff_src, all `total` rows (unrouted rows keep SENTINEL). */
  readonly dx: Float64Array;
  /** diff_weights [G, K, N]. */
  readonly dw: Float64Array;
  /** diff_bias [G, N] (when asked). */
  readonly db: Float64Array | undefined;
}

/** Inputs exact in every type (k/16 values for bf16/f16), routed rows only; extra rows are NaN-free zeros. */
export function bwdInputs(c: BwdCase): BwdInputs {
  const rng = mulberry32(c.seed ?? 7);
  const t = c.dt ?? 'f32';
  const M = c.sizes.reduce((a, b) => a + b, 0), total = c.total ?? M;
  const gen = (n: number): Float64Array => (t === 'f32' ? randomF32(rng, n) : randomLowPrecisionExact(rng, n));
  const pad = (v: Float64Array, cols: number): Float64Array => {
    const o = new Float64Array(total * cols);
    o.set(v);
    return o;
  };
  return { x: pad(gen(M * c.K), c.K), w: gen(c.G * c.K * c.N), dy: pad(gen(M * c.N), c.N), total, dt: t };
}

const RT = RUNTIME_DIM_VAL;

function rowsMd(p: Proposal, total: number, cols: number, t: DataType, G: number, ld: number | undefined): MemoryDesc {
  const strides = ld === undefined ? undefined : [ld, 1];
  if (p === 'p1') return memory.desc.grouped([total, cols], t, G, [RT, cols], dt.s32, strides);
  return memory.desc([total, cols], t, strides ?? tag.ab);
}

/** Runs backward data and backward weights for one case and proposal; returns what they wrote. */
export async function runBackward(eng: Engine, strm: Stream, c: BwdCase, p: Proposal, inp: BwdInputs = bwdInputs(c)): Promise<BwdResult> {
  if (p === 'p3') return runP3(eng, strm, c, inp);
  const { G, K, N, sizes } = c;
  const { total, dt: t } = inp;
  const attr = p === 'p2' ? new PrimitiveAttr().setGroupedOffsets(ARG.SRC, G) : undefined;
  const xMd = rowsMd(p, total, K, t, G, c.ld), dyMd = rowsMd(p, total, N, t, G, c.ld), dxMd = rowsMd(p, total, K, t, G, c.ld);
  const wLayout = c.weights ?? 'abc';
  const wUser = memory.desc([G, K, N], t, wLayout === 'acb' ? tag.acb : tag.abc);
  const dataPd = new matmul_backward_data.PrimitiveDesc(eng, dxMd, wLayout === 'any' ? memory.desc([G, K, N], t, tag.any) : wUser, dyMd, undefined, attr);
  const dwMd = memory.desc([G, K, N], t, tag.abc);
  const dbMd = memory.desc([G, N], dt.f32, tag.ab);
  const wPd = c.bias
    ? new matmul_backward_weights.PrimitiveDesc(eng, xMd, dwMd, dyMd, undefined, attr, dbMd)
    : new matmul_backward_weights.PrimitiveDesc(eng, xMd, dwMd, dyMd, undefined, attr);
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, handles?: readonly (number | undefined)[]): Memory => {
    const m = Memory.create(md, eng, handles);
    mems.push(m);
    return m;
  };
  try {
    const x = mk(xMd), dy = mk(dyMd), dx = mk(dxMd), wu = mk(wUser), dw = mk(dwMd);
    const db = c.bias ? mk(dbMd) : undefined;
    writeLogical(x, inp.x, SENTINEL);
    writeLogical(dy, inp.dy, SENTINEL);
    writeLogical(wu, inp.w, SENTINEL);
    dx.write(new Float64Array(dx.elementCount).fill(SENTINEL));
    dw.write(new Float64Array(dw.elementCount).fill(SENTINEL));
    db?.write(new Float64Array(db.elementCount).fill(SENTINEL));
    let offs: Memory | undefined;
    if (p === 'p1') {
      for (const m of [x, dy, dx]) offsets.fromSizes(sizes, m.offsets);
    } else {
      offs = mk(memory.desc([G + 1], dt.s32, tag.a));
      offsets.fromSizes(sizes, offs.values as Int32Array);
    }
    let wei = wu;
    if (wLayout === 'any') {
      wei = mk(dataPd.queryMd('weights')!);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, wUser, wei.desc)).execute(strm, { [ARG.FROM]: wu, [ARG.TO]: wei });
    }
    const extra = offs ? { [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs } : {};
    new matmul_backward_data.Primitive(dataPd).execute(strm, { [ARG.DIFF_DST]: dy, [ARG.WEIGHTS]: wei, [ARG.DIFF_SRC]: dx, ...extra });
    new matmul_backward_weights.Primitive(wPd).execute(strm, { [ARG.SRC]: x, [ARG.DIFF_DST]: dy, [ARG.DIFF_WEIGHTS]: dw, ...(db ? { [ARG.DIFF_BIAS]: db } : {}), ...extra });
    await strm.wait();
    return { dx: readLogical(dx), dw: readLogical(dw), db: db ? readLogical(db) : undefined };
  } finally {
    for (const m of mems) m.free();
  }
}

/** P#3: one allocation per expert for every tensor; rows per expert in ARG.RUNTIME_DIMS. */
async function runP3(eng: Engine, strm: Stream, c: BwdCase, inp: BwdInputs): Promise<BwdResult> {
  const { G, K, N, sizes } = c;
  const t = inp.dt;
  const M = sizes.reduce((a, b) => a + b, 0);
  const xMds = sizes.map(() => memory.desc([RT, K], t, tag.ab));
  const dyMds = sizes.map(() => memory.desc([RT, N], t, tag.ab));
  const dwMds = sizes.map(() => memory.desc([K, N], t, tag.ab));
  const wLayout = c.weights ?? 'abc';
  const wUserMd = memory.desc([K, N], t, wLayout === 'acb' ? tag.ba : tag.ab);
  const rdMd = memory.desc([G], dt.s32, tag.a);
  const dbMd = memory.desc([G, N], dt.f32, tag.ab);
  const pd = c.bias ? new grouped_gemm_backward_weights.PrimitiveDesc(eng, xMds, dwMds, dbMd, dyMds, rdMd) : new grouped_gemm_backward_weights.PrimitiveDesc(eng, xMds, dwMds, dyMds, rdMd);
  const dataPd = new grouped_gemm_backward_data.PrimitiveDesc(eng, xMds, sizes.map(() => (wLayout === 'any' ? memory.desc([K, N], t, tag.any) : wUserMd)), dyMds, rdMd);
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, handle?: number): Memory => {
    const m = Memory.create(md, eng, handle);
    mems.push(m);
    return m;
  };
  /** A plain [rows, cols] buffer holding `v`, seen through a runtime-rows descriptor (the expert's own allocation). */
  const expert = (md: MemoryDesc, v: Float64Array, rows: number, cols: number): [Memory, Memory] => {
    const plain = mk(memory.desc([Math.max(rows, 1), cols], t, tag.ab));
    plain.write(rows ? v : new Float64Array(cols).fill(SENTINEL));
    return [mk(md, plain.handles[0]), plain];
  };
  try {
    const wArgs: Record<number, Memory> = {}, dArgs: Record<number, Memory> = {};
    let r0 = 0;
    const dws: Memory[] = [], dxs: Memory[] = [];
    for (let g = 0; g < G; g++) {
      const [x] = expert(xMds[g], inp.x.subarray(r0 * K, (r0 + sizes[g]) * K), sizes[g], K);
      const [dy] = expert(dyMds[g], inp.dy.subarray(r0 * N, (r0 + sizes[g]) * N), sizes[g], N);
      const [dx, dxPlain] = expert(xMds[g], new Float64Array(sizes[g] * K).fill(SENTINEL), sizes[g], K);
      const dw = mk(dwMds[g]);
      dw.write(new Float64Array(K * N).fill(SENTINEL));
      const wu = mk(wUserMd);
      writeLogical(wu, inp.w.subarray(g * K * N, (g + 1) * K * N));
      let w = wu;
      if (wLayout === 'any') {
        w = mk(dataPd.queryMd('weights', g)!);
        new reorder.Primitive(new reorder.PrimitiveDesc(eng, wUserMd, w.desc)).execute(strm, { [ARG.FROM]: wu, [ARG.TO]: w });
      }
      wArgs[ARG.MULTIPLE_SRC + g] = x;
      wArgs[ARG.MULTIPLE_DST + g] = dy;
      wArgs[ARG.MULTIPLE_WEIGHTS + g] = dw;
      dArgs[ARG.MULTIPLE_DST + g] = dy;
      dArgs[ARG.MULTIPLE_WEIGHTS + g] = w;
      dArgs[ARG.MULTIPLE_SRC + g] = dx;
      dws.push(dw);
      dxs.push(dxPlain);
      r0 += sizes[g];
    }
    const rd = mk(rdMd);
    (rd.values as Int32Array).set(sizes);
    wArgs[ARG.RUNTIME_DIMS] = rd;
    const db = c.bias ? mk(dbMd) : undefined;
    if (db) {
      db.write(new Float64Array(G * N).fill(SENTINEL));
      wArgs[ARG.DIFF_BIAS] = db;
    }
    dArgs[ARG.RUNTIME_DIMS] = rd;
    new grouped_gemm_backward_weights.Primitive(pd).execute(strm, wArgs);
    new grouped_gemm_backward_data.Primitive(dataPd).execute(strm, dArgs);
    await strm.wait();
    const dw = new Float64Array(G * K * N);
    dws.forEach((m, g) => dw.set(m.read(), g * K * N));
    const dx = new Float64Array(M * K);
    let o = 0;
    dxs.forEach((m, g) => {
      if (sizes[g]) dx.set(m.read(), o);
      o += sizes[g] * K;
    });
    return { dx, dw, db: db ? Float64Array.from(db.read()) : undefined };
  } finally {
    for (const m of mems) m.free();
  }
}
