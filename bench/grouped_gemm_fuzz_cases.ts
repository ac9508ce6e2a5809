/**
 * Seeded randomized cross-check of Proposal #3 (`grouped_gemm`: per-expert src / weights / dst, runtime M_i in a
 * device buffer, experts of different K / N) and Proposal #2 (matmul with the grouped-offsets attribute) on the cpu
 * and gpu engines against the tests' float64 expectation (test/quant_helpers.ts `expectElement`, through the
 * runners the tests use: runP3Q, runGM, runGpuGM). Each case runs on both engines; the gpu runs it twice (same bits);
 * bad runtime data (M_i above capacity or negative, offsets decreasing / past the extent / not starting at 0) must
 * be a DnnlError at stream.wait() with every dst byte, the guard rows past each expert's view included, untouched.
 *
 * The cases and their runs; bench/grouped_gemm_fuzz.ts is the command line, test/grouped_gemm_fuzz.test.ts runs a
 * fixed seed in CI.
 */
import {
  ARG, DnnlError, Engine, Memory, reorder, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, grouped_gemm, matmul, memory, tag,
  type DataType, type GpuEngine, type GpuMemory, type MemoryDesc,
} from '../src/index.js';
import { GM, runGM, runP3Q, type GMCase, type GluSpec, type Outcome, type P3QCase, type QSpec, type TestOp } from '../test/quant_helpers.js';
import { runGpuGM } from '../test/gpu_quant_helpers.js';
import { toleranceFor } from '../test/helpers.js';
import { mismatches, type RefPostOp } from '../test/reference.js';
import { runP3, type P3Case } from '../test/proposal_helpers.js';
import { mulberry32, type Rng } from '../test/workloads.js';
import { dqIntData, dqIntReference, runDqMatmul } from '../test/dynamic_int8_runner.js';

// ---------------------------------------------------------------------------------------------------
// Random choices.

const int = (rng: Rng, lo: number, hi: number): number => lo + Math.floor(rng() * (hi - lo + 1));
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];
const chance = (rng: Rng, p: number): boolean => rng() < p;

/** Largest K / N and M_i of the generated cases: 'small' keeps a CI run of a few cases within seconds on SwiftShader. */
const LIMITS = { full: { dim: 200, rows: 70 }, small: { dim: 40, rows: 12 } } as const;
let limits: (typeof LIMITS)[keyof typeof LIMITS] = LIMITS.full;

/** A dim up to the limit (~200), often off every power-of-two tile (odd, primes), sometimes small or a tile multiple. */
function dim(rng: Rng, mult = 1): number {
  // (now and then past the kernels' larger tiles: K > 256, N > 128)
  const max = limits === LIMITS.full && chance(rng, 0.08) ? 520 : limits.dim;
  if (mult > 1) return mult * int(rng, 1, Math.max(1, Math.floor(max / mult)));
  const r = rng();
  if (r < 0.15) return int(rng, 1, 4);
  if (r < 0.3) return pick(rng, [16, 32, 64, 96, 128, 160].filter((d) => d <= max));
  if (r < 0.5) return pick(rng, [7, 13, 31, 33, 37, 63, 65, 97, 127, 129, 199].filter((d) => d <= max));
  return int(rng, 1, max);
}

/** Rows per group: zeros, ones, one group taking all, up to the limit (70). */
function rowsFor(rng: Rng, G: number): number[] {
  const max = limits === LIMITS.full && chance(rng, 0.08) ? 160 : limits.rows;
  if (chance(rng, 0.2)) {
    const all = int(rng, 1, max), at = int(rng, 0, G - 1);
    return Array.from({ length: G }, (_, i) => (i === at ? all : 0));
  }
  return Array.from({ length: G }, () => (chance(rng, 0.3) ? 0 : chance(rng, 0.3) ? 1 : int(rng, 1, max)));
}

const WEIGHT_ONLY = [dt.s8, dt.u8, dt.s4, dt.u4, dt.f8_e4m3, dt.f8_e5m2, dt.f4_e2m1] as const;
const SCALE_TYPES: readonly DataType[] = [dt.f32, dt.f32, dt.bf16, dt.f16, dt.e8m0, dt.f8_e4m3];
const BINARY_TYPES: readonly DataType[] = [dt.f32, dt.f32, dt.bf16, dt.f16, dt.s8, dt.u8];
const zpType = (rng: Rng, w: DataType): DataType => pick(rng, w === dt.u8 || w === dt.u4 ? [dt.s32, dt.u8] : [dt.s32, dt.s8]);
const INT_WEIGHTS: readonly DataType[] = [dt.s8, dt.u8, dt.s4, dt.u4];

interface Types { readonly srcDt: DataType; readonly weiDt: DataType; readonly dstDt: DataType; readonly weightOnly: boolean }

function types(rng: Rng): Types {
  const r = rng();
  if (r < 0.3) return { srcDt: dt.f32, weiDt: dt.f32, dstDt: chance(rng, 0.2) ? pick(rng, [dt.bf16, dt.f16]) : dt.f32, weightOnly: false };
  if (r < 0.45) {
    const t = pick(rng, [dt.bf16, dt.f16]);
    return { srcDt: t, weiDt: t, dstDt: chance(rng, 0.5) ? t : dt.f32, weightOnly: false };
  }
  return { srcDt: chance(rng, 0.8) ? dt.f32 : pick(rng, [dt.bf16, dt.f16]), weiDt: pick(rng, WEIGHT_ONLY), dstDt: chance(rng, 0.8) ? dt.f32 : dt.bf16, weightOnly: true };
}

function gluFor(rng: Rng): GluSpec {
  return { alg: pick(rng, ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'] as const), layout: pick(rng, ['halves', 'interleaved'] as const) };
}

/** An eltwise post-op, or a sum unless the chain has one (oneDNN takes one sum per chain). */
function eltwiseOrSum(rng: Rng, hasSum: boolean): Exclude<TestOp, { kind: 'binary' }> {
  if (!hasSum && chance(rng, 0.25)) return { kind: 'sum', scale: pick(rng, [0.5, 1, 2]) };
  const alg = pick(rng, ['eltwise_relu', 'eltwise_linear', 'eltwise_clip', 'eltwise_abs', 'eltwise_square'] as const);
  if (alg === 'eltwise_relu') return { kind: 'eltwise', alg, alpha: pick(rng, [0, 0.5]) };
  if (alg === 'eltwise_linear') return { kind: 'eltwise', alg, alpha: 0.5, beta: -1 };
  if (alg === 'eltwise_clip') return { kind: 'eltwise', alg, alpha: -4, beta: 6 };
  return { kind: 'eltwise', alg };
}

// ---------------------------------------------------------------------------------------------------
// Case generators.

type P3Op = NonNullable<P3QCase['ops']>[number];

/** A Proposal #3 case (no bias: grouped_gemm's pd takes none). */
function genP3(rng: Rng, seed: number): P3QCase {
  const E = int(rng, 1, 9);
  const t = types(rng);
  const kBlock = t.weightOnly && chance(rng, 0.4) ? pick(rng, [4, 8, 16, 32]) : 0;
  const glu = chance(rng, 0.15) ? gluFor(rng) : undefined;
  const same = chance(rng, 0.4);
  const shape = (): { K: number; N: number } => {
    const N = dim(rng);
    return { K: dim(rng, kBlock || 1), N: glu ? 2 * Math.max(1, Math.ceil(N / 2)) : N };
  };
  const s0 = shape();
  const rows = rowsFor(rng, E);
  const experts = rows.map((r) => {
    const s = same ? s0 : shape();
    return { ...s, rows: r, cap: chance(rng, 0.5) ? r : r + int(rng, 1, 5) };
  });
  const scales: { -readonly [k in keyof NonNullable<P3QCase['scales']>]: NonNullable<P3QCase['scales']>[k] } = {};
  if (t.weightOnly) scales.weights = { kind: kBlock || 'col', dt: pick(rng, SCALE_TYPES) };
  else if (chance(rng, 0.2)) scales.weights = { kind: pick(rng, ['tensor', 'col'] as const), dt: pick(rng, SCALE_TYPES) };
  if (chance(rng, 0.2)) scales.src = { kind: pick(rng, ['tensor', 'row'] as const), dt: pick(rng, SCALE_TYPES) };
  if (chance(rng, 0.15)) scales.dst = { kind: 'tensor', dt: pick(rng, SCALE_TYPES) };
  const zps: { -readonly [k in keyof NonNullable<P3QCase['zps']>]: NonNullable<P3QCase['zps']>[k] } = {};
  if (INT_WEIGHTS.includes(t.weiDt) && chance(rng, 0.3)) zps.weights = { kind: pick(rng, ['tensor', 'col'] as const), dt: zpType(rng, t.weiDt) };
  const dstNs = experts.map((e) => (glu ? e.N / 2 : e.N));
  const equalN = dstNs.every((n) => n === dstNs[0]);
  const ops: P3Op[] = [];
  for (let j = int(rng, 0, 2); j > 0; j--) {
    if (chance(rng, 0.4)) ops.push({ kind: 'binary', alg: pick(rng, ['binary_add', 'binary_mul'] as const), shape: pick(rng, equalN ? ['shared_1', 'shared_n', 'row_1', 'row_n'] as const : ['shared_1', 'row_1'] as const), dt: pick(rng, BINARY_TYPES) });
    else ops.push(eltwiseOrSum(rng, ops.some((o) => o.kind === 'sum')));
  }
  return {
    experts, srcDt: t.srcDt, weiDt: t.weiDt, dstDt: t.dstDt, seed,
    ...(Object.keys(scales).length ? { scales } : {}), ...(Object.keys(zps).length ? { zps } : {}),
    ...(glu ? { glu } : {}), ...(ops.length ? { ops } : {}), ...(chance(rng, 0.25) ? { packed: true } : {}),
    ...(same && experts.every((e) => e.rows === experts[0].rows && e.cap === experts[0].cap) && chance(rng, 0.5) ? { sharedSrc: true } : {}),
  };
}

/** A Proposal #2 case: offsets attribute, G = 1 and empty groups included, rows past the last offset. */
function genP2(rng: Rng, seed: number): GMCase {
  const G = chance(rng, 0.15) ? 1 : int(rng, 1, 9);
  const t = types(rng);
  const kBlock = t.weightOnly && chance(rng, 0.4) ? pick(rng, [4, 8, 16, 32]) : 0;
  const glu = chance(rng, 0.15) ? gluFor(rng) : undefined;
  const K = dim(rng, kBlock || 1);
  const N0 = dim(rng);
  const N = glu ? 2 * Math.max(1, Math.ceil(N0 / 2)) : N0;
  const sizes = rowsFor(rng, G);
  const used = sizes.reduce((a, b) => a + b, 0);
  const scales: { src?: QSpec; weights?: QSpec; dst?: QSpec } = {};
  if (t.weightOnly) scales.weights = { gran: kBlock ? GM.weights.kBlock(kBlock) : GM.weights.expertCol, dt: pick(rng, SCALE_TYPES) };
  else if (chance(rng, 0.2)) scales.weights = { gran: pick(rng, [GM.weights.tensor, GM.weights.expert, GM.weights.expertCol]), dt: pick(rng, SCALE_TYPES) };
  if (chance(rng, 0.2)) scales.src = { gran: pick(rng, [GM.src.row, GM.src.expert]), dt: pick(rng, SCALE_TYPES) };
  if (chance(rng, 0.15)) scales.dst = { gran: GM.dst.expert, dt: pick(rng, SCALE_TYPES) };
  const zps: { weights?: QSpec } = {};
  if (INT_WEIGHTS.includes(t.weiDt) && chance(rng, 0.3)) zps.weights = { gran: pick(rng, [GM.weights.tensor, GM.weights.expert, GM.weights.expertCol]), dt: zpType(rng, t.weiDt) };
  const ops: TestOp[] = [];
  for (let j = int(rng, 0, 2); j > 0; j--) {
    if (chance(rng, 0.4)) ops.push({ kind: 'binary', alg: pick(rng, ['binary_add', 'binary_mul'] as const), shape: pick(rng, ['row_n', 'row_1', 'expert_1', 'expert_n', 'expert3_1', 'expert3_n'] as const), dt: pick(rng, BINARY_TYPES) });
    else ops.push(eltwiseOrSum(rng, ops.some((o) => o.kind === 'sum')));
  }
  return {
    proposal: 'P2', G, K, N, sizes, totalM: used + (chance(rng, 0.5) ? 0 : int(rng, 1, 4)), srcDt: t.srcDt, weiDt: t.weiDt, dstDt: t.dstDt, seed,
    ...(Object.keys(scales).length ? { scales } : {}), ...(Object.keys(zps).length ? { zps } : {}),
    ...(glu ? { glu } : {}), ...(ops.length ? { ops } : {}), ...(chance(rng, 0.3) ? { bias: true } : {}), ...(chance(rng, 0.25) ? { packed: true } : {}),
  };
}

/** A P#3 `:dq` case (dynamic int8 activations on integer weights, rfcs/0006): per-column or K-block f32 scales. */
interface P3Dq { readonly experts: readonly { K: number; N: number; rows: number; cap: number }[]; readonly wdt: DataType; readonly blk: number; readonly seed: number }

function genP3Dq(rng: Rng, seed: number): P3Dq {
  const E = int(rng, 1, 9);
  const blk = chance(rng, 0.4) ? pick(rng, [16, 32, 64]) : 0;
  const same = chance(rng, 0.4);
  const shape = (): { K: number; N: number } => ({ K: blk && chance(rng, 0.9) ? dim(rng, blk) : dim(rng), N: dim(rng) });
  const s0 = shape();
  const experts = rowsFor(rng, E).map((rows) => ({ ...(same ? s0 : shape()), rows, cap: rows + (chance(rng, 0.5) ? 0 : int(rng, 1, 4)) }));
  return { experts, wdt: pick(rng, INT_WEIGHTS), blk, seed };
}

/** A P#2 `:dq` case: offsets attribute, integer weights [G, K, N], per-column or K-block scales, bias, rows past the last offset. */
interface P2Dq { readonly G: number; readonly K: number; readonly N: number; readonly sizes: readonly number[]; readonly capacity: number; readonly wdt: DataType; readonly blk: number; readonly bias: boolean; readonly form: 'any' | 'plain'; readonly seed: number }

function genP2Dq(rng: Rng, seed: number): P2Dq {
  const G = chance(rng, 0.15) ? 1 : int(rng, 1, 9);
  const blk = chance(rng, 0.4) ? pick(rng, [16, 32, 64]) : 0;
  const sizes = rowsFor(rng, G);
  const used = sizes.reduce((a, b) => a + b, 0);
  return {
    G, K: blk && chance(rng, 0.9) ? dim(rng, blk) : dim(rng), N: dim(rng), sizes, capacity: used + (chance(rng, 0.5) ? 0 : int(rng, 1, 4)),
    wdt: pick(rng, INT_WEIGHTS), blk, bias: chance(rng, 0.4), form: pick(rng, ['any', 'plain'] as const), seed,
  };
}

/**
 * A P#3 case of the proposal tests' runner (runP3: random values, refGroupedM, the dtype's tolerance): experts as
 * `expertViews` of one buffer (rows past the last view untouched) or separate allocations, ab / ba / tag.any weights,
 * transcendental eltwise post-ops. cpu engine only (a GpuMemory has no views at a byte offset).
 */
function genP3Ref(rng: Rng, seed: number): P3Case {
  const E = int(rng, 1, 9);
  const views = chance(rng, 0.5);
  const t = pick(rng, [dt.f32, dt.f32, dt.bf16, dt.f16]);
  const s0 = { K: dim(rng), N: dim(rng) };
  const rows = rowsFor(rng, E);
  const wei = pick(rng, ['ab', 'ba', 'any'] as const);
  const experts = rows.map((r) => ({ ...(views || chance(rng, 0.4) ? s0 : { K: dim(rng), N: dim(rng) }), rows: r, wei, ...(views ? {} : { cap: r + (chance(rng, 0.5) ? 0 : int(rng, 1, 4)) }) }));
  const ops: RefPostOp[] = [];
  for (let j = int(rng, 0, 2); j > 0; j--) {
    ops.push(pick(rng, [
      { kind: 'relu', alpha: 0 }, { kind: 'linear', alpha: 0.5, beta: 0.25 }, { kind: 'tanh' }, { kind: 'logistic' }, { kind: 'elu', alpha: 1 },
      { kind: 'soft_relu', alpha: 1 }, { kind: 'mish' }, { kind: 'hardswish', alpha: 1 / 6, beta: 0.5 }, { kind: 'square' }, { kind: 'abs' },
      ...(ops.some((o) => o.kind === 'sum') ? [] : [{ kind: 'sum' as const, scale: 0.5 }]),
    ] as const));
  }
  const used = rows.reduce((a, b) => a + b, 0);
  return { layout: views ? 'views' : 'separate', experts, srcDt: t, weiDt: t, dstDt: t, seed, ...(ops.length ? { postOps: ops } : {}), ...(views && chance(rng, 0.5) ? { totalM: used + int(rng, 1, 5) } : {}) };
}

/** Bad runtime data: M_i of one expert above its capacity or negative (P#3), bad offsets (P#2). */
/**
 * Weights of a bad-data case: f32, bf16 (src / weights / dst), s8 weight-only (f32 src / dst, per-column scales), or
 * s8 with dynamic int8 activations (`:dq`): each takes other kernels (and on the gpu other passes) that must all
 * check the runtime rows before writing.
 */
type BadMode = 'f32' | 'bf16' | 'wo' | 'dq';
/** Expert i: src and dst views of `srcCap` / `dstCap` rows (the kernel's bound is the smaller one) over allocations with guard rows. */
interface BadP3 { readonly experts: readonly { K: number; N: number; srcCap: number; dstCap: number }[]; readonly dims: readonly number[]; readonly mode: BadMode }
interface BadP2 { readonly G: number; readonly K: number; readonly N: number; readonly totalM: number; readonly offsets: readonly number[]; readonly mode: BadMode }

const badMode = (rng: Rng): BadMode => pick(rng, ['f32', 'bf16', 'wo', 'dq'] as const);

function genBadP3(rng: Rng): BadP3 {
  const E = int(rng, 1, 6);
  const experts = Array.from({ length: E }, () => {
    const cap = int(rng, 0, 20);
    const other = chance(rng, 0.5) ? cap : cap + int(rng, 1, 6);
    return chance(rng, 0.5) ? { K: dim(rng), N: dim(rng), srcCap: cap, dstCap: other } : { K: dim(rng), N: dim(rng), srcCap: other, dstCap: cap };
  });
  const dims = experts.map((e) => int(rng, 0, Math.min(e.srcCap, e.dstCap)));
  const bad = int(rng, 0, E - 1), cap = Math.min(experts[bad].srcCap, experts[bad].dstCap);
  dims[bad] = pick(rng, [cap + 1, cap + 1, cap + int(rng, 2, 50), -1, -int(rng, 2, 100), 0x7fffffff, -0x80000000]);
  return { experts, dims, mode: badMode(rng) };
}

function genBadP2(rng: Rng): BadP2 {
  const G = int(rng, 1, 6), K = dim(rng), N = dim(rng);
  const sizes = rowsFor(rng, G);
  const used = sizes.reduce((a, b) => a + b, 0);
  const totalM = Math.max(1, used + int(rng, 0, 3));
  const offs = [0];
  for (const s of sizes) offs.push(offs[offs.length - 1] + s);
  const how = int(rng, 0, 3);
  if (how === 0) offs[G] = totalM + int(rng, 1, 40); // past the extent
  else if (how === 1) offs[0] = pick(rng, [1, -1, -0x80000000]); // first not 0
  else if (how === 2 && G >= 2) { const i = int(rng, 1, G - 1); offs[i] = offs[i + 1] + int(rng, 1, 5); } // decreasing
  else offs[int(rng, 1, G)] = 0x7fffffff;
  return { G, K, N, totalM, offsets: offs, mode: badMode(rng) };
}

// ---------------------------------------------------------------------------------------------------
// Runs.

type AnyEngine = Engine | GpuEngine;
type AnyMemory = Memory | GpuMemory;
type Verdict = { readonly status: 'ok' } | { readonly status: 'refused' | 'skipped' | 'mismatch' | 'error' | 'nondeterministic'; readonly detail: string };

const refusal = (e: unknown): boolean => e instanceof DnnlError && (e.status === 'unimplemented' || e.status === 'invalid_arguments') && /PrimitiveDesc|pd|grouped_gemm:|matmul:/.test(e.stack ?? '');

/** |got - want| <= rel |want| + abs per element; rel from the dst type's test tolerance (at least 2e-6 for the transcendental epilogues). */
function compare(o: Outcome, dstDt: DataType): string | undefined {
  if (o.got.length !== o.want.length) return `length ${o.got.length} vs ${o.want.length}`;
  const rel = Math.max(2e-6, toleranceFor(dstDt).rel), abs = 1e-5;
  const bad: string[] = [];
  let n = 0;
  for (let i = 0; i < o.got.length; i++) {
    const g = o.got[i], w = o.want[i];
    if (Object.is(g, w) || Math.abs(g - w) <= rel * Math.abs(w) + abs) continue;
    if (n++ < 4) bad.push(`[${i}] got ${g} want ${w}`);
  }
  return n ? `${n}/${o.got.length} elements off: ${bad.join(', ')} (${o.pd.implInfo})` : undefined;
}

const sameBits = (a: Outcome, b: Outcome): boolean => a.got.length === b.got.length && a.got.every((v, i) => Object.is(v, b.got[i]));

/** Runs `go` once (cpu) or twice (gpu: the second run must give the same bits); errors classified. */
async function verdictOf(gpu: boolean, dstDt: DataType, go: () => Promise<Outcome>): Promise<Verdict> {
  try {
    const o = await go();
    const off = compare(o, dstDt);
    if (off) return { status: 'mismatch', detail: off };
    if (gpu && !sameBits(o, await go())) return { status: 'nondeterministic', detail: `second run differs (${o.pd.implInfo})` };
    return { status: 'ok' };
  } catch (e) {
    const msg = e instanceof Error ? e.message.split('\n')[0] : String(e);
    if (refusal(e)) return { status: 'refused', detail: msg };
    // (tag.any weights: the pd may choose a plain layout; the runner's packed path then has nothing to fill)
    if (/the pd picks a layout/.test(msg)) return { status: 'skipped', detail: `tag.any resolved to a plain layout: ${msg}` };
    return { status: /past M written|past the last offset|was written/.test(msg) ? 'mismatch' : 'error', detail: msg };
  }
}

/** A runtime-rows memory over `bytes` of `plain` (either engine kind). */
function rowsView(md: MemoryDesc, eng: AnyEngine, plain: AnyMemory, bytes: number): AnyMemory {
  return eng.kind === 'gpu'
    ? Memory.create(md, eng, (plain as GpuMemory).buffers[0], { capacityBytes: bytes })
    : Memory.create(md, eng, (plain as Memory).handles[0], { capacityBytes: bytes });
}

const GUARD_ROWS = 2;
const FILL = 768; // exact in bf16

/** Expects a DnnlError (invalid_arguments) at wait (or at execute) and every dst element, guard rows included, untouched. */
async function expectRejectedUntouched(strm: Stream, run: () => void, dsts: readonly AnyMemory[]): Promise<Verdict> {
  let err: unknown;
  try {
    run();
    await strm.wait();
  } catch (e) {
    err = e;
  }
  if (err === undefined) return { status: 'mismatch', detail: 'no error for bad runtime data' };
  if (!(err instanceof DnnlError) || err.status !== 'invalid_arguments') return { status: 'error', detail: `not an invalid_arguments DnnlError: ${String(err)}` };
  for (const [i, d] of dsts.entries()) {
    const v = await d.read();
    const at = Array.from(v).findIndex((x) => x !== FILL);
    if (at >= 0) return { status: 'mismatch', detail: `dst ${i} element ${at} written (${v[at]}) despite ${err.message}` };
  }
  return { status: 'ok' };
}

/**
 * Creates a primitive (a DnnlError there: refused), then runs `body` with a maker of memories on `eng`; frees those
 * and the primitive once the stream has drained.
 */
async function withPrimitive<D, P extends { destroy(): void }>(eng: AnyEngine, strm: Stream, create: () => D, primOf: (pd: D) => P, body: (pd: D, prim: P, mk: (md: MemoryDesc) => AnyMemory) => Promise<Verdict>): Promise<Verdict> {
  let pd: D;
  try {
    pd = create();
  } catch (e) {
    if (e instanceof DnnlError) return { status: 'refused', detail: e.message };
    throw e;
  }
  const prim = primOf(pd);
  const mems: AnyMemory[] = [];
  try {
    return await body(pd, prim, (md) => { const m = Memory.create(md, eng as Engine); mems.push(m); return m; });
  } finally {
    await strm.wait().catch(() => undefined);
    mems.forEach((m) => m.free());
    prim.destroy();
  }
}

const DQ_SENTINEL = 12345;

/**
 * P#3 `:dq` on either engine: tag.any weights reordered to the pd's layout (the weights scales in the reorder when the
 * layout holds them), src rows past M_i NaN (never read), dst rows past them a sentinel; every expert's rows against
 * the float64 model of the row quantization (dqIntReference) within a few f32 ulps of the largest term, the rest
 * untouched. The gpu runs it twice (same bits).
 */
async function runP3Dq(eng: AnyEngine, c: P3Dq): Promise<Verdict> {
  const G = c.experts.length, strm = new Stream(eng);
  const data = c.experts.map((e, g) => dqIntData({ E: 1, sizes: [e.rows], K: e.K, N: e.N, wdt: c.wdt, blk: c.blk }, c.seed + g));
  const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8);
  if (c.blk) attr.setScales(ARG.MULTIPLE_WEIGHTS, 3, [c.blk, 1], dt.f32);
  else attr.setScales(ARG.MULTIPLE_WEIGHTS, 2, [], dt.f32);
  const srcMds = c.experts.map((e) => memory.desc([RT, e.K], dt.f32, tag.ab)), dstMds = c.experts.map((e) => memory.desc([RT, e.N], dt.f32, tag.ab));
  const dimsMd = memory.desc([G], dt.s32, tag.x);
  const create = (): grouped_gemm.PrimitiveDesc => new grouped_gemm.PrimitiveDesc(eng, srcMds, c.experts.map((e) => memory.desc([e.K, e.N], c.wdt, tag.any)), dstMds, dimsMd, attr);
  return withPrimitive(eng, strm, create, (pd) => new grouped_gemm.Primitive(pd), async (pd, prim, mk) => {
    const args: Record<number, AnyMemory> = {};
    const dsts: AnyMemory[] = [];
    c.experts.forEach((e, g) => {
      const xs = new Float32Array(e.cap * e.K).fill(Number.NaN);
      xs.set(data[g].x);
      const src = mk(memory.desc([Math.max(e.cap, 1), e.K], dt.f32, tag.ab)).write(e.cap ? xs : new Float32Array(e.K));
      const dst = mk(memory.desc([Math.max(e.cap, 1), e.N], dt.f32, tag.ab)).write(new Float32Array(Math.max(e.cap, 1) * e.N).fill(DQ_SENTINEL));
      dsts.push(dst);
      const user = mk(memory.desc([e.K, e.N], c.wdt, tag.ab)).write(data[g].w);
      const scales = mk(pd.queryMd('scales:weights', g)!).write(data[g].sc);
      const sv = rowsView(srcMds[g], eng, src, e.cap * e.K * 4), dv = rowsView(dstMds[g], eng, dst, e.cap * e.N * 4);
      const wmd = pd.queryMd('weights', g)!;
      let wei = user;
      if (!wmd.equals(user.desc)) {
        wei = mk(wmd);
        new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, wmd)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales } as Record<number, Memory>);
      }
      args[ARG.MULTIPLE_SRC + g] = sv;
      args[ARG.MULTIPLE_DST + g] = dv;
      args[ARG.MULTIPLE_WEIGHTS + g] = wei;
      if (!wmd.packed?.quant?.scales) args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + g)] = scales;
    });
    args[ARG.RUNTIME_DIMS] = mk(dimsMd).write(c.experts.map((e) => e.rows));
    const once = async (): Promise<Float32Array[]> => {
      prim.execute(strm, args as Record<number, Memory>);
      await strm.wait();
      return Promise.all(dsts.map(async (d) => Float32Array.from(await d.read())));
    };
    const got = await once();
    for (const [g, e] of c.experts.entries()) {
      const want = dqIntReference({ sizes: [e.rows], K: e.K, N: e.N, blk: c.blk }, data[g].x, data[g].w, data[g].sc, undefined);
      let scale = 0;
      for (const v of want) scale = Math.max(scale, Math.abs(v));
      const n = e.rows * e.N;
      for (let i = 0; i < n; i++) {
        if (!(Math.abs(got[g][i] - want[i]) <= 4e-6 * scale)) return { status: 'mismatch', detail: `expert ${g} element ${i} = ${got[g][i]}, want ${want[i]} (max |want| ${scale}; ${pd.implInfo})` };
      }
      const at = got[g].subarray(n).findIndex((v) => v !== DQ_SENTINEL);
      if (at >= 0) return { status: 'mismatch', detail: `expert ${g}: element ${n + at} past M_i written (${pd.implInfo})` };
    }
    if (eng.kind === 'gpu') {
      const again = await once();
      if (!again.every((d, g) => d.every((v, i) => Object.is(v, got[g][i])))) return { status: 'nondeterministic', detail: `second run differs (${pd.implInfo})` };
    }
    return { status: 'ok' };
  });
}

/** The data types and attribute of a bad-data mode (weights per-column scales: `[N]` for P#3 (mask 2), `[G, N]` for P#2 (mask 5)). */
function badTypes(mode: BadMode, p3: boolean): { src: DataType; wei: DataType; dst: DataType; attr: PrimitiveAttr } {
  const attr = new PrimitiveAttr();
  if (mode === 'wo' || mode === 'dq') attr.setScales(p3 ? ARG.MULTIPLE_WEIGHTS : ARG.WEIGHTS, p3 ? 2 : 5, [], dt.f32);
  if (mode === 'dq') attr.setDynamicQuantization(ARG.SRC, dt.s8);
  const t = mode === 'bf16' ? dt.bf16 : dt.f32;
  return { src: t, wei: mode === 'bf16' ? dt.bf16 : mode === 'f32' ? dt.f32 : dt.s8, dst: t, attr };
}

/**
 * Weights in the layout the pd chose (plain, or a reorder from plain, with the scales when the layout holds them);
 * the weights scales (all 0.5) go into `args` at `scalesId` unless the layout holds them.
 */
function badWeights(eng: AnyEngine, strm: Stream, wmd: MemoryDesc, plainDims: number[], smd: MemoryDesc | undefined, args: Record<number, AnyMemory>, weiId: number, scalesId: number, mk: (md: MemoryDesc) => AnyMemory): void {
  const plainMd = memory.desc(plainDims, wmd.dataType, plainDims.length === 2 ? tag.ab : tag.abc);
  const plain = mk(plainMd).write(new Float32Array(plainDims.reduce((a, b) => a * b, 1)).fill(1));
  const scales = smd ? mk(smd).write(new Float32Array(smd.dims.reduce((a, b) => a * b, 1)).fill(0.5)) : undefined;
  let wei = plain;
  if (!wmd.equals(plainMd)) {
    wei = mk(wmd);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, plainMd, wmd)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, ...(scales && wmd.packed?.quant?.scales ? { [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales } : {}) } as Record<number, Memory>);
  }
  args[weiId] = wei;
  if (scales && !wmd.packed?.quant?.scales) args[scalesId] = scales;
}

/** P#2 `:dq` through the tests' runner against the float64 model of the row quantization; the gpu runs it twice (same bits). */
async function runP2Dq(eng: AnyEngine, c: P2Dq): Promise<Verdict> {
  const d = dqIntData({ E: c.G, sizes: c.sizes, K: c.K, N: c.N, wdt: c.wdt, blk: c.blk, bias: c.bias }, c.seed);
  const want = dqIntReference({ sizes: c.sizes, K: c.K, N: c.N, blk: c.blk }, d.x, d.w, d.sc, d.bias);
  const go = (): ReturnType<typeof runDqMatmul> => runDqMatmul(eng, new Stream(eng), {
    E: c.G, sizes: c.sizes, capacity: c.capacity, K: c.K, N: c.N, proposal: 'P2', x: d.x, w: d.w, wdt: c.wdt,
    scales: { data: d.sc, blk: c.blk }, bias: d.bias, form: c.form,
  });
  let r: Awaited<ReturnType<typeof runDqMatmul>>;
  try {
    r = await go();
  } catch (e) {
    const msg = e instanceof Error ? e.message.split('\n')[0] : String(e);
    return { status: refusal(e) ? 'refused' : /past the last offset/.test(msg) ? 'mismatch' : 'error', detail: msg };
  }
  let scale = 0;
  for (const v of want) scale = Math.max(scale, Math.abs(v));
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(r.got[i] - want[i]) <= 4e-6 * scale)) return { status: 'mismatch', detail: `element ${i} = ${r.got[i]}, want ${want[i]} (max |want| ${scale}; ${r.impl})` };
  }
  if (eng.kind === 'gpu' && !(await go()).got.every((v, i) => Object.is(v, r.got[i]))) return { status: 'nondeterministic', detail: `second run differs (${r.impl})` };
  return { status: 'ok' };
}

async function runP3Ref(eng: AnyEngine, c: P3Case): Promise<Verdict> {
  if (eng.kind === 'gpu') return { status: 'skipped', detail: 'cpu engine only (views)' };
  try {
    const r = await runP3(eng, new Stream(eng), c);
    const bad = mismatches(r.got, r.ref, r.tol);
    if (bad.length) return { status: 'mismatch', detail: `${bad.length}/${r.got.length} off the reference: ${JSON.stringify(bad.slice(0, 3))}` };
    if (r.strayWrites.length) return { status: 'mismatch', detail: `${r.strayWrites.length} stray writes, first ${r.strayWrites.slice(0, 4).join(',')}` };
    return { status: 'ok' };
  } catch (e) {
    return { status: refusal(e) ? 'refused' : 'error', detail: e instanceof Error ? e.message.split('\n')[0] : String(e) };
  }
}

async function runBadP3(eng: AnyEngine, c: BadP3): Promise<Verdict> {
  const E = c.experts.length;
  const strm = new Stream(eng);
  const ty = badTypes(c.mode, true);
  const mds = (cols: number, t: DataType): MemoryDesc => memory.desc([RT, cols], t, tag.ab);
  const dimsMd = memory.desc([E], dt.s32, tag.x);
  const wtag = c.mode === 'dq' ? tag.any : tag.ab;
  const bytes = (t: DataType): number => (t === dt.bf16 ? 2 : 4);
  const create = (): grouped_gemm.PrimitiveDesc => new grouped_gemm.PrimitiveDesc(eng, c.experts.map((e) => mds(e.K, ty.src)), c.experts.map((e) => memory.desc([e.K, e.N], ty.wei, wtag)), c.experts.map((e) => mds(e.N, ty.dst)), dimsMd, ty.attr);
  return withPrimitive(eng, strm, create, (pd) => new grouped_gemm.Primitive(pd), async (pd, prim, mk) => {
    const args: Record<number, AnyMemory> = {};
    const parents: AnyMemory[] = [];
    c.experts.forEach((e, i) => {
      const sRows = e.srcCap + GUARD_ROWS, dRows = e.dstCap + GUARD_ROWS;
      const sp = mk(memory.desc([sRows, e.K], ty.src, tag.ab)).write(new Float32Array(sRows * e.K).fill(1));
      const dp = mk(memory.desc([dRows, e.N], ty.dst, tag.ab)).write(new Float32Array(dRows * e.N).fill(FILL));
      parents.push(dp);
      const sv = rowsView(mds(e.K, ty.src), eng, sp, e.srcCap * e.K * bytes(ty.src)), dv = rowsView(mds(e.N, ty.dst), eng, dp, e.dstCap * e.N * bytes(ty.dst));
      args[ARG.MULTIPLE_SRC + i] = sv;
      args[ARG.MULTIPLE_DST + i] = dv;
      badWeights(eng, strm, pd.queryMd('weights', i)!, [e.K, e.N], pd.queryMd('scales:weights', i), args, ARG.MULTIPLE_WEIGHTS + i, ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + i), mk);
    });
    args[ARG.RUNTIME_DIMS] = mk(dimsMd).write(c.dims);
    await strm.wait();
    return expectRejectedUntouched(strm, () => prim.execute(strm, args as Record<number, Memory>), parents);
  });
}

async function runBadP2(eng: AnyEngine, c: BadP2): Promise<Verdict> {
  const strm = new Stream(eng);
  const ty = badTypes(c.mode, false);
  ty.attr.setGroupedOffsets(ARG.SRC, c.G, dt.s32);
  const srcMd = memory.desc([c.totalM, c.K], ty.src, tag.ab), dstMd = memory.desc([c.totalM, c.N], ty.dst, tag.ab);
  const create = (): matmul.PrimitiveDesc => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([c.G, c.K, c.N], ty.wei, c.mode === 'dq' ? tag.any : tag.abc), dstMd, ty.attr);
  return withPrimitive(eng, strm, create, (pd) => new matmul.Primitive(pd), async (pd, prim, mk) => {
    const dst = mk(dstMd).write(new Float32Array(c.totalM * c.N).fill(FILL));
    const args: Record<number, AnyMemory> = {
      [ARG.SRC]: mk(srcMd).write(new Float32Array(c.totalM * c.K).fill(1)),
      [ARG.DST]: dst,
      [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: mk(pd.queryMd('grouped_offsets')!).write(c.offsets),
    };
    badWeights(eng, strm, pd.queryMd('weights')!, [c.G, c.K, c.N], pd.queryMd('scales:weights'), args, ARG.WEIGHTS, ARG.ATTR_SCALES | ARG.WEIGHTS, mk);
    await strm.wait();
    return expectRejectedUntouched(strm, () => prim.execute(strm, args as Record<number, Memory>), [dst]);
  });
}

// ---------------------------------------------------------------------------------------------------
// Driver.

export type FuzzCase =
  | { readonly kind: 'P3'; readonly c: P3QCase }
  | { readonly kind: 'P2'; readonly c: GMCase }
  | { readonly kind: 'P3dq'; readonly c: P3Dq }
  | { readonly kind: 'P2dq'; readonly c: P2Dq }
  | { readonly kind: 'P3ref'; readonly c: P3Case }
  | { readonly kind: 'bad-P3'; readonly c: BadP3 }
  | { readonly kind: 'bad-P2'; readonly c: BadP2 };

/** Case `index` of seed `seed`: its own generator stream, so one case reruns alone. */
export function generateCase(seed: number, index: number, kind?: FuzzCase['kind'], size: keyof typeof LIMITS = 'full'): FuzzCase {
  limits = LIMITS[size];
  const rng = mulberry32((seed * 100003 + index * 7919) >>> 0);
  const k = kind ?? (() => { const r = rng(); return r < 0.3 ? 'P3' : r < 0.52 ? 'P2' : r < 0.62 ? 'P3dq' : r < 0.7 ? 'P2dq' : r < 0.8 ? 'P3ref' : r < 0.9 ? 'bad-P3' : 'bad-P2'; })();
  const s = (seed * 1000 + index) >>> 0;
  switch (k) {
    case 'P3': return { kind: k, c: genP3(rng, s) };
    case 'P2': return { kind: k, c: genP2(rng, s) };
    case 'P3dq': return { kind: k, c: genP3Dq(rng, s) };
    case 'P2dq': return { kind: k, c: genP2Dq(rng, s) };
    case 'P3ref': return { kind: k, c: genP3Ref(rng, s) };
    case 'bad-P3': return { kind: k, c: genBadP3(rng) };
    case 'bad-P2': return { kind: k, c: genBadP2(rng) };
  }
}

/** One case on one engine (packed weights are a cpu engine case: dropped on the gpu). */
export async function runCase(eng: AnyEngine, fc: FuzzCase): Promise<Verdict> {
  const gpu = eng.kind === 'gpu';
  switch (fc.kind) {
    case 'P3': {
      const c = gpu ? { ...fc.c, packed: undefined } : fc.c;
      return verdictOf(gpu, c.dstDt ?? dt.f32, () => runP3Q(eng, new Stream(eng), c));
    }
    case 'P2': {
      const c = gpu ? { ...fc.c, packed: undefined } : fc.c;
      return verdictOf(gpu, c.dstDt ?? dt.f32, () => (gpu ? runGpuGM(eng, new Stream(eng), c) : runGM(eng, new Stream(eng), c)));
    }
    case 'P3dq': return runP3Dq(eng, fc.c).catch((e: unknown) => ({ status: 'error' as const, detail: String(e) }));
    case 'P2dq': return runP2Dq(eng, fc.c);
    case 'P3ref': return runP3Ref(eng, fc.c);
    case 'bad-P3': return runBadP3(eng, fc.c).catch((e: unknown) => ({ status: 'error' as const, detail: String(e) }));
    case 'bad-P2': return runBadP2(eng, fc.c).catch((e: unknown) => ({ status: 'error' as const, detail: String(e) }));
  }
}

/** A one-line summary of a case (the JSON description is printed for failures). */
export function describeCase(fc: FuzzCase): string {
  const c = fc.c;
  if (fc.kind === 'P3') {
    const p = fc.c;
    const q = [p.scales?.weights ? `sw:${p.scales.weights.kind}` : '', p.scales?.src ? `ss:${p.scales.src.kind}` : '', p.scales?.dst ? 'sd' : '', p.zps?.weights ? `zw:${p.zps.weights.kind}` : ''].filter(Boolean).join(',');
    return `P3 E=${p.experts.length} ${p.srcDt}:${p.weiDt}:${p.dstDt} [${p.experts.map((e) => `${e.rows}/${e.cap}x${e.K}x${e.N}`).join(' ')}] ${q}${p.glu ? ` glu:${p.glu.alg}/${p.glu.layout}` : ''}${p.ops ? ` ops:${p.ops.map((o) => (o.kind === 'binary' ? `${o.alg}/${o.shape}` : o.kind === 'sum' ? 'sum' : o.alg)).join('+')}` : ''}${p.packed ? ' packed' : ''}`;
  }
  if (fc.kind === 'P2') {
    const p = fc.c;
    const q = [p.scales?.weights ? `sw:${p.scales.weights.gran.name}` : '', p.scales?.src ? `ss:${p.scales.src.gran.name}` : '', p.scales?.dst ? 'sd' : '', p.zps?.weights ? `zw:${p.zps.weights.gran.name}` : ''].filter(Boolean).join(',');
    return `P2 G=${p.G} K=${p.K} N=${p.N} ${p.srcDt}:${p.weiDt}:${p.dstDt} sizes=[${p.sizes.join(',')}] totalM=${p.totalM} ${q}${p.bias ? ' bias' : ''}${p.glu ? ` glu:${p.glu.alg}/${p.glu.layout}` : ''}${p.ops ? ` ops:${p.ops.map((o) => (o.kind === 'binary' ? `${o.alg}/${o.shape}` : o.kind === 'sum' ? 'sum' : o.alg)).join('+')}` : ''}${p.packed ? ' packed' : ''}`;
  }
  if (fc.kind === 'P3dq') {
    const p = fc.c;
    return `P3:dq E=${p.experts.length} ${p.wdt} ${p.blk ? `K-blocks of ${p.blk}` : 'per-column'} [${p.experts.map((e) => `${e.rows}/${e.cap}x${e.K}x${e.N}`).join(' ')}]`;
  }
  if (fc.kind === 'P3ref') {
    const p = fc.c;
    return `P3ref ${p.layout} E=${p.experts.length} ${p.srcDt} wei:${p.experts[0].wei} [${p.experts.map((e) => `${e.rows}/${e.cap ?? e.rows}x${e.K}x${e.N}`).join(' ')}]${p.totalM ? ` totalM=${p.totalM}` : ''}${p.postOps ? ` ops:${p.postOps.map((o) => o.kind).join('+')}` : ''}`;
  }
  if (fc.kind === 'P2dq') {
    const p = fc.c;
    return `P2:dq G=${p.G} K=${p.K} N=${p.N} ${p.wdt} ${p.blk ? `K-blocks of ${p.blk}` : 'per-column'} sizes=[${p.sizes.join(',')}] capacity=${p.capacity}${p.bias ? ' bias' : ''} ${p.form}`;
  }
  return `${fc.kind} ${JSON.stringify(c)}`;
}

