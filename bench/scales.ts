/**
 * `npm run scales`: compares quantization recipes (type x granularity x scale type) on a realistic
 * MoE grouped GEMM run through the library — error vs the float64 f32 product, bytes of weights +
 * scales, and speed — and writes reports/scales.md and a self-contained reports/scales.html.
 *
 *   npm run scales
 *   npm run scales -- --E=8 --tokens=256 --topk=2 --K=1024 --N=1024 --seed=1 --threads=2
 *   npm run scales -- --recipes=int8\ W8A8,mxfp4,nvfp4      # ids, id prefixes with *, or family names
 *   npm run scales -- --list                                # list the recipes
 *
 * Other flags:
 *   --weights=plain,packed  weights as given (abc), and/or tag.any reordered into the pd's packed layout (recipe id +packed)
 *   --zipf=1            routing skew (Zipf exponent of expert popularity)
 *   --outliers=0.01     fraction of K channels that are outliers; --gain=20:50 their gain range
 *   --token-sigma=0.5   spread of the lognormal per-token magnitude
 *   --kernels=auto      auto | simd128 | relaxed | none (none: the reference implementation only)
 *   --budget=160        soft target in seconds for the whole run (sets the number of timing rounds)
 *   --min-ms=600        timing per recipe for recipes timed on their own (see below)
 *   --check-rows=16     rows per expert for the dequantized-reference check
 *   --out=reports       output directory; --no-write: terminal only; --json=FILE: also the raw results
 *
 * Phase 1 quantizes each recipe, runs it once and measures its error. Phase 2 times the recipes
 * round-robin (one run each per round, as many rounds as the budget allows) so that load changes on
 * a shared machine hit all of them alike. Recipes on a slow implementation (>= 1 s per call), on
 * the threads=1 fallback engine, or beyond 1.5 GB of held memory are timed on their own in phase 1.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync, writeSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DnnlError, Engine } from '../src/index.js';
import { timeIt } from './timing.js';
import { selfTest } from './scales/codecs.js';
import { F64Gemm, allRows, makeWorkload, sampleRows, type Workload } from './scales/data.js';
import { errorStats, median, relError, type ErrorStats } from './scales/metrics.js';
import { plainOperand, quantizeSrc, quantizeWei, type AttrTensor, type QTensor } from './scales/quantize.js';
import { allRecipes, describeOperand, filterRecipes, type Recipe } from './scales/recipes.js';
import { IMPL_TOL, html, markdown, terminalTable, type Bytes, type Check, type Result, type RunInfo } from './scales/report.js';
import { attrCallString, runRecipe, type AttrCall, type Prepared, type RunOutcome } from './scales/run.js';
import { libraryQuantizers, type LibQuant } from './scales/libquant.js';
import { validate } from './scales/validate.js';

// ----------------------------------------------------------------------------------------------
// flags
// ----------------------------------------------------------------------------------------------

/** A command-line mistake: print it without a stack trace and exit. */
function usage(message: string): never {
  console.error(`scales: ${message}`);
  process.exit(2);
}

const flags = new Map<string, string>();
for (const a of process.argv.slice(2)) {
  const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
  if (!m) usage(`unknown argument ${a} (flags are --name=value)`);
  flags.set(m[1], m[2] ?? 'true');
}
const KNOWN = ['E', 'tokens', 'topk', 'K', 'N', 'seed', 'threads', 'recipes', 'list', 'zipf', 'outliers', 'gain', 'token-sigma', 'min-ms', 'budget', 'check-rows', 'out', 'no-write', 'json', 'kernels', 'weights'];
for (const k of flags.keys()) if (!KNOWN.includes(k)) usage(`unknown flag --${k}; known: ${KNOWN.map((x) => `--${x}`).join(' ')}`);

function intFlag(name: string, dflt: number): number {
  const v = flags.get(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n <= 0) usage(`--${name} must be a positive integer, got ${v}`);
  return n;
}
function numFlag(name: string, dflt: number): number {
  const v = flags.get(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) usage(`--${name} must be a non-negative number, got ${v}`);
  return n;
}

const gainFlag = (flags.get('gain') ?? '20:50').split(':').map(Number);
if (gainFlag.length !== 2 || gainFlag.some((g) => !(g > 0))) usage('--gain must be lo:hi, e.g. 20:50');
const opts = {
  E: intFlag('E', 8),
  tokens: intFlag('tokens', 256),
  topk: intFlag('topk', 2),
  K: intFlag('K', 1024),
  N: intFlag('N', 1024),
  seed: intFlag('seed', 1),
  zipf: numFlag('zipf', 1),
  outlierFrac: numFlag('outliers', 0.01),
  outlierGain: [gainFlag[0], gainFlag[1]] as const,
  tokenSigma: numFlag('token-sigma', 0.5),
};
const threads = intFlag('threads', availableParallelism());
const kernels = (flags.get('kernels') ?? 'auto') as 'auto' | 'simd128' | 'relaxed' | 'none';
if (!['auto', 'simd128', 'relaxed', 'none'].includes(kernels)) usage('--kernels must be auto, simd128, relaxed or none (reference only)');
const minMs = numFlag('min-ms', 600);
const budgetS = numFlag('budget', 160);
/** Heap bytes of recipes kept alive for round-robin timing (beyond it, a recipe is timed at once). */
const HOLD_BYTES = 1.5e9;
const MIN_ROUNDS = 5;
const MAX_ROUNDS = 31;
const checkRows = intFlag('check-rows', 16);
const outDir = flags.get('out') ?? fileURLToPath(new URL('../reports', import.meta.url));
let recipes: Recipe[] = [];
try {
  recipes = filterRecipes(allRecipes(), flags.get('recipes'));
  // --weights=plain,packed (default both): each recipe also with tag.any weights reordered into the
  // layout the pd picks (issue 12: x8 / x4 code panels decoded in the kernel, s16 / f32 panels).
  const forms = (flags.get('weights') ?? 'plain,packed').split(',');
  if (forms.some((f) => f !== 'plain' && f !== 'packed')) throw new Error('--weights takes plain, packed or plain,packed');
  recipes = recipes.flatMap((r) => [...(forms.includes('plain') ? [r] : []), ...(forms.includes('packed') ? [{ ...r, id: `${r.id}+packed`, packed: true }] : [])]);
} catch (e) {
  usage(e instanceof Error ? e.message : String(e));
}
if (opts.topk > opts.E) usage(`--topk ${opts.topk} exceeds --E ${opts.E}`);

if (flags.has('list')) {
  for (const r of allRecipes()) console.log(`${r.id.padEnd(18)} ${r.family.padEnd(12)} src ${describeOperand(r.src, 'src').padEnd(22)} weights ${describeOperand(r.wei, 'wei').padEnd(24)} ${r.note ?? ''}`);
  process.exit(0);
}

// ----------------------------------------------------------------------------------------------
// preparation of one recipe
// ----------------------------------------------------------------------------------------------

/** Granularity block sizes must divide K and N (RFC 0002: `K % gK == 0`, `N % gN == 0`). */
function shapeProblem(r: Recipe, w: Workload): string | undefined {
  const { K, N } = w.opts;
  for (const o of [r.src, r.wei]) {
    if ('plain' in o) continue;
    const g = o.gran;
    if ('gK' in g && K % g.gK !== 0) return `K = ${K} is not a multiple of the K-block ${g.gK}`;
    if ('gN' in g && N % g.gN !== 0) return `N = ${N} is not a multiple of the N-block ${g.gN}`;
  }
  return undefined;
}

interface Quantized extends Prepared {
  readonly quantBy: { src: string; wei: string };
  readonly libAgree: string;
  /** Float64 GEMM over the dequantized weights and the weights' operand error (cached with them). */
  readonly weiGemm: F64Gemm;
  readonly weiErr: number;
}

interface WeiEntry { t: QTensor; agree: string | undefined; gemm: F64Gemm; err: number }

/** Quantized weights of the last few recipes (several recipes share their weights). */
const weiCache = new Map<string, WeiEntry>();
const WEI_CACHE_SIZE = 2;

function quantizeWeights(r: Recipe, w: Workload, lib: LibQuant): WeiEntry {
  const key = JSON.stringify(r.wei);
  const hit = weiCache.get(key);
  if (hit) {
    weiCache.delete(key);
    weiCache.set(key, hit);
    return hit;
  }
  const { E, K, N } = w.opts;
  let t: QTensor, agree: string | undefined;
  if ('plain' in r.wei) t = plainOperand(w.wei, r.wei.plain);
  else {
    const own = quantizeWei(w.wei, E, K, N, r.wei.gran, r.wei.q);
    const viaLib = lib.wei(w, r.wei.gran, r.wei.q, own);
    t = viaLib?.t ?? own;
    agree = viaLib?.agree;
  }
  const entry = { t, agree, gemm: new F64Gemm(w, t.deq), err: relError(w.wei, t.deq) };
  weiCache.set(key, entry);
  while (weiCache.size > WEI_CACHE_SIZE) weiCache.delete(weiCache.keys().next().value!);
  return entry;
}

function quantizeRecipe(r: Recipe, w: Workload, lib: LibQuant): Quantized {
  const { E, K } = w.opts;
  const notes: string[] = [];
  let src: QTensor;
  if ('plain' in r.src) src = plainOperand(w.src, r.src.plain);
  else {
    const own = quantizeSrc(w.src, w.totalM, K, E, w.rowExpert, r.src.gran, r.src.q);
    const viaLib = lib.src(w, r.src.gran, r.src.q, own);
    src = viaLib?.t ?? own;
    if (viaLib) notes.push(viaLib.agree);
  }
  const we = quantizeWeights(r, w, lib);
  const wei = we.t;
  if (we.agree) notes.push(we.agree);
  const calls: AttrCall[] = [];
  if (src.scales) calls.push({ what: 'scales', arg: 'SRC', t: src.scales });
  if (src.zeroPoints) calls.push({ what: 'zero_points', arg: 'SRC', t: src.zeroPoints });
  if (wei.scales) calls.push({ what: 'scales', arg: 'WEIGHTS', t: wei.scales });
  if (wei.zeroPoints) calls.push({ what: 'zero_points', arg: 'WEIGHTS', t: wei.zeroPoints });
  if (r.global === 'dst-scale') {
    // NVFP4: acc uses the e4m3 block scales; the f32 per-tensor (src) x per-expert (weights) factor
    // goes into a per-expert dst scale: dst = acc / s_dst with s_dst[g] = 1 / (gsrc * gwei[g]).
    const gs = src.global?.[0] ?? 1;
    const values = Float64Array.from({ length: E }, (_, g) => Math.fround(1 / (gs * (wei.global?.[g] ?? 1))));
    const t: AttrTensor = { mask: 0, groups: [], dims: [E], dt: 'f32', bytes: new Uint8Array(Float32Array.from(values).buffer), values };
    calls.push({ what: 'scales', arg: 'DST', t });
  }
  return { src, wei, calls, quantBy: { src: src.by, wei: wei.by }, libAgree: notes.join('; '), weiGemm: we.gemm, weiErr: we.err };
}

function bytesOf(q: QTensor, w: Workload): Bytes {
  const { E, K, N } = w.opts;
  const weights = q.bytes.length;
  const scales = q.scales?.bytes.length ?? 0;
  const zeroPoints = q.zeroPoints?.bytes.length ?? 0;
  const global = q.global ? q.global.length * 4 : 0;
  const total = weights + scales + zeroPoints + global;
  return { weights, scales, zeroPoints, global, total, bitsPerWeight: (8 * total) / (E * K * N), compression: (4 * E * K * N) / total };
}

// ----------------------------------------------------------------------------------------------
// main
// ----------------------------------------------------------------------------------------------

function gitCommit(): string {
  const r = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dirname(fileURLToPath(import.meta.url)), encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : 'unknown';
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const w = makeWorkload(opts);
  const flops = 2 * w.totalM * opts.K * opts.N;
  const workloadText = `E=${opts.E} experts, ${opts.tokens} tokens top-${opts.topk} (${w.totalM} rows), K=${opts.K}, N=${opts.N}, seed ${opts.seed}; ${(flops / 1e9).toFixed(2)} GFLOP per call`;
  const outlierText = `Activations: N(0,1) x lognormal token magnitude (sigma ${opts.tokenSigma}) with ${w.outliers.length} outlier channels (${(100 * opts.outlierFrac).toFixed(1)}% of K, gain x${opts.outlierGain[0]}-x${opts.outlierGain[1]}: channels ${w.outliers.map((o) => `${o.k}(x${o.gain.toFixed(0)})`).join(' ')}); weights N(0, 1/K); Zipf s=${opts.zipf} routing.`;
  console.log(`groupdnn scales  node ${process.version}  cores ${availableParallelism()}  threads ${threads}`);
  console.log(`  ${workloadText}`);
  console.log(`  rows per expert: ${w.sizes.join(' + ')}`);
  console.log(`  ${outlierText}`);

  const nSelf = selfTest(opts.seed);
  const selfTestText = `the tool's fast RNE encoders for f8_e4m3, f8_e5m2, f4_e2m1 agree with src/common/low_precision.ts on ${nSelf} values (every code, every tie, neighbours of ties, saturation, random).`;

  const tRef = performance.now();
  const refAll = new F64Gemm(w, w.wei).run(w.src, allRows(w));
  const rows = sampleRows(w, checkRows);
  console.log(`  float64 reference: ${((performance.now() - tRef) / 1000).toFixed(1)} s; check rows: ${rows.length}; ${recipes.length} recipes`);

  let eng = await Engine.create({ threads, kernels });
  // A library error that escapes the stream (an unhandled rejection from a worker job) must not kill
  // the run: it is attributed to the recipe that was executing, and the engine is recreated.
  const escaped: string[] = [];
  const escape = (e: unknown): void => {
    escaped.push(e instanceof DnnlError ? e.message : e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    if (!(e instanceof DnnlError)) writeSync(2, `scales: error escaped from the library: ${e instanceof Error ? e.stack : String(e)}\n`);
  };
  process.on('unhandledRejection', escape);
  process.on('uncaughtException', escape); // tsx may raise unhandled rejections as uncaught exceptions
  const lib = libraryQuantizers();
  const results: Result[] = [];
  const notes: string[] = [`1-minute load average at the start: ${loadavg()[0].toFixed(2)} (${availableParallelism()} cores).`];
  /** A recipe that ran: its accuracy figures, and timing filled in later. */
  interface Ran {
    readonly base: Omit<Result, 'status'>;
    readonly err: ErrorStats;
    readonly chk: ErrorStats;
    readonly implInfo: string;
    readonly fallback: string | undefined;
    readonly firstMs: number;
    readonly engine: Engine;
    exec?: () => Promise<void>;
    release?: () => void;
    samples: number[];
    time?: NonNullable<Result['time']>;
    failed?: string;
    emulated: ErrorStats;
  }
  const ran: Ran[] = [];
  const order: (Ran | Result)[] = []; // results in recipe order
  let eng1: Engine | undefined; // single-thread engine for the fallback runs
  const retired: Engine[] = []; // engines replaced after a failure, still holding recipes to time
  try {
    /**
     * After an execution failure the engine (workers, heap) may be unusable: later recipes get a new
     * one. Recipes already waiting for phase 2 on the old engine keep it (released at the end).
     */
    const resetEngine = async (): Promise<void> => {
      if (ran.some((x) => x.exec && x.engine === eng)) retired.push(eng);
      else eng.release();
      eng = await Engine.create({ threads, kernels });
    };
    const releaseRan = (x: Ran): void => {
      x.release?.();
      x.release = undefined;
      x.exec = undefined;
    };
    const emulate = (deqRef: Float64Array): ErrorStats => errorStats(deqRef, subRows(refAll, rows, opts.N), Int32Array.from(rows.keys()), opts.N);
    const settle = async (): Promise<string | undefined> => {
      await new Promise((resolve) => setTimeout(resolve, 10)); // let escaped rejections surface
      return escaped.length ? `unhandled rejection from the library: ${escaped.splice(0).join('; ')}` : undefined;
    };
    /** Runs the recipe once (checked run); library errors, thrown or escaped, become a failure. */
    const firstRun = async (e: Engine, q: Quantized, packed: boolean): Promise<RunOutcome> => {
      const out = await runRecipe(e, w, q, packed);
      const esc = await settle();
      if (!esc) return out;
      if (out.ok) out.release();
      return { ok: false, stage: 'execute', message: [out.ok ? '' : out.message, esc].filter(Boolean).join('; ') };
    };
    let heldBytes = 0;

    // Phase 1: quantize, run once through the library, measure the error. Slow implementations (the
    // reference) are timed right away; the others stay alive for phase 2.
    for (const [idx, r] of recipes.entries()) {
      const tr = performance.now();
      const srcDesc = describeOperand(r.src, 'src'), weiDesc = describeOperand(r.wei, 'wei');
      const shapeErr = shapeProblem(r, w);
      if (shapeErr) {
        console.log(`  ${r.id}: skipped (${shapeErr})`);
        notes.push(`Skipped by the tool (shape): ${r.id}: ${shapeErr}.`);
        continue;
      }
      const q = quantizeRecipe(r, w, lib);
      const base = {
        recipe: r, srcDesc, weiDesc, calls: q.calls.map(attrCallString), bytes: bytesOf(q.wei, w),
        opErr: { src: relError(w.src, q.src.deq), wei: q.weiErr }, quantBy: q.quantBy, libAgree: q.libAgree,
      };
      const deqRef = q.weiGemm.run(q.src.deq, rows);
      let out = await firstRun(eng, q, r.packed === true);
      let runEngine = eng;
      let fallback: string | undefined;
      if (!out.ok && out.stage !== 'pd') {
        await resetEngine();
        if (threads > 1) {
          // Retry on one thread: the recipe's numbers are still worth having; the failure is reported.
          console.log(`  ${r.id.padEnd(18)} FAILED with ${threads} threads (${out.message}); retrying with threads=1`);
          fallback = `failed with ${threads} threads: ${out.message}`;
          eng1 ??= await Engine.create({ threads: 1, kernels });
          runEngine = eng1;
          out = await firstRun(eng1, q, r.packed === true);
          if (!out.ok && out.stage !== 'pd') out = { ...out, message: `${fallback}; with threads=1: ${out.message}` };
        }
      }
      if (!out.ok) {
        order.push({ ...base, status: out.stage === 'pd' ? 'rejected' : 'failed', stage: out.stage, message: out.message, emulated: emulate(deqRef) });
        console.log(`  ${r.id.padEnd(18)} ${out.stage === 'pd' ? 'rejected' : 'FAILED'}: ${out.message}`);
        continue;
      }
      if (r.packed) { // bytes as the matmul reads them: the packed layout (panel padding and embedded scales / zero points included)
        const b0 = base.bytes;
        const b = { ...b0, scales: b0.scales - out.embedded.scales, zeroPoints: b0.zeroPoints - out.embedded.zeroPoints };
        const total = out.weightBytes + b.scales + b.zeroPoints + b.global;
        base.bytes = { ...b, weights: out.weightBytes, total, bitsPerWeight: (8 * total) / (opts.E * opts.K * opts.N), compression: (4 * opts.E * opts.K * opts.N) / total };
      }
      const x: Ran = {
        base, err: errorStats(out.dst, refAll, allRows(w), opts.N), chk: errorStats(out.dst, deqRef, rows, opts.N, (i) => rows[i]),
        implInfo: out.implInfo + (fallback ? ' (threads=1 fallback)' : ''), fallback, firstMs: out.firstMs, engine: runEngine, exec: out.exec, release: out.release, samples: [], emulated: emulate(deqRef),
      };
      ran.push(x);
      order.push(x);
      if (out.firstMs >= 1000 || fallback || heldBytes + out.heapBytes > HOLD_BYTES) {
        // Timed now: a slow implementation, a fallback engine, or too much memory held already.
        try {
          // Half of this recipe's share of the remaining budget (the rest is for phase 2).
          const allowMs = Math.max(0, (budgetS * 1000 - (performance.now() - t0)) / (recipes.length - idx)) / 2;
          x.time = await timeRecipe(out.exec, out.firstMs, allowMs);
          const esc = await settle();
          if (esc) throw new Error(esc);
        } catch (e) {
          x.failed = `a timing run failed after a successful first run: ${e instanceof Error ? e.message : String(e)}`;
        }
        releaseRan(x);
        if (x.failed && runEngine === eng) await resetEngine();
      } else heldBytes += out.heapBytes;
      const wrong = x.chk.relFro < IMPL_TOL ? '' : `  WRONG RESULT: differs from the dequantized float64 product by ${x.chk.relFro.toExponential(1)}`;
      console.log(`  ${r.id.padEnd(18)} rel.Frob ${x.err.relFro.toExponential(2)}  first run ${out.firstMs.toFixed(1)} ms  ${x.implInfo}  (${((performance.now() - tr) / 1000).toFixed(1)} s)${wrong}${x.failed ? `  FAILED: ${x.failed}` : ''}`);
    }

    // Phase 2: round-robin timing of the recipes still alive, one run each per round, so that load
    // changes on a shared machine hit every recipe alike. As many rounds as the budget allows.
    const live = ran.filter((x) => x.exec);
    if (live.length) {
      const roundMs = live.reduce((sum, x) => sum + x.firstMs, 0);
      const leftMs = budgetS * 1000 - (performance.now() - t0);
      const rounds = Math.max(MIN_ROUNDS, Math.min(MAX_ROUNDS, Math.floor(leftMs / Math.max(1, roundMs))));
      console.log(`  timing: ${rounds} round-robin rounds over ${live.length} recipes (~${(roundMs / 1000).toFixed(1)} s per round)`);
      notes.push(`Timing: ${rounds} round-robin rounds over ${live.length} recipes (one run of each recipe per round, after a warm-up run), median of the rounds; ${ran.length - live.length} recipe(s) timed on their own.`);
      for (const x of live) await x.exec!().catch(() => undefined); // warm-up after phase 1's allocations
      let broken = false;
      for (let round = 0; round < rounds && !broken; round++) {
        for (const x of live) {
          const ts = performance.now();
          try {
            await x.exec!();
            const esc = await settleQuick();
            if (esc) throw new Error(esc);
          } catch (e) {
            x.failed = `a timing run failed after a successful first run: ${e instanceof Error ? e.message : String(e)}`;
            broken = true;
            break;
          }
          x.samples.push(performance.now() - ts);
        }
      }
      for (const x of live) {
        if (!x.failed && x.samples.length) {
          x.time = { median: median(x.samples), min: Math.min(...x.samples), max: Math.max(...x.samples), runs: x.samples.length };
        }
        releaseRan(x);
      }
      if (broken) notes.push('Round-robin timing stopped early after a failed run; recipes keep the samples taken until then (see the runs count).');
    }
  } finally {
    for (const x of ran) x.release?.();
    for (const e of [...retired, eng1, eng]) e?.release();
  }

  /** An escaped error without waiting (the next await surfaces it). */
  function settleQuick(): string | undefined {
    return escaped.length ? `unhandled rejection from the library: ${escaped.splice(0).join('; ')}` : undefined;
  }

  for (const o of order) {
    if (!('samples' in o)) {
      results.push(o);
      continue;
    }
    if (o.failed || !o.time) {
      results.push({ ...o.base, status: 'failed', stage: 'execute', message: o.failed ?? 'not timed', emulated: o.emulated });
      continue;
    }
    results.push({
      ...o.base, status: 'ok', err: o.err, implCheck: { relFro: o.chk.relFro, maxRel: o.chk.maxAbs / o.chk.maxRef }, time: o.time, gflops: flops / o.time.median / 1e6,
      implInfo: o.implInfo, ...(o.fallback ? { message: o.fallback } : {}),
    });
  }
  notes.push(`1-minute load average at the end: ${loadavg()[0].toFixed(2)}.`);


  const checks: Check[] = validate(results, opts);
  const impls = new Set(results.filter((r) => r.status === 'ok').map((r) => r.implInfo));
  if (impls.size === 1 && results.filter((r) => r.status === 'ok').length > 1) {
    notes.push(`Every recipe reports the same pd.implInfo (${[...impls][0]}): in this build the name does not tell which kernel path ran (e.g. the exact int8 path vs dequantization while packing); the speed column shows the difference.`);
  }
  const totalSeconds = (performance.now() - t0) / 1000;
  notes.push(...lib.notes);
  notes.push('Scales are computed from the block absolute maximum: s = amax / max(type) (s8: 127, s4: 7, f8_e4m3: 448, f8_e5m2: 57344, f4_e2m1: 6), rounded to the scale type first, then elements are quantized with the stored scale (RNE, saturating). MX: e8m0 scale 2^(floor(log2 amax) - emax), emax 8 / 15 / 2 (OCP MX v1.0). NVFP4: f32 global amax / (448*6) per expert (weights) or per tensor (src), f8_e4m3 block scale (block amax / 6) / global; the two globals are folded into a per-expert dst scale (RFC 0002 section 3).');
  notes.push(`Workload: outlier channels are shared by every row (channel outliers, as in LLM activations): per-row scales cannot isolate them, K-blocks can. Token magnitudes are lognormal (sigma ${opts.tokenSigma}, --token-sigma), which is what per-row scales gain over per-tensor ones. Rows are drawn independently (a token routed to ${opts.topk} experts is not duplicated; duplicates would not change per-row statistics).`);
  notes.push('"src tensor" is one value for the whole activation tensor, passed as mask 0 on the grouped src, i.e. `[G]` filled with that value (RFC 0002: for a grouped src, mask 0 is per group).');
  notes.push('Activation quantization time is not included in the speed figures (only the matmul execution); weights are plain `[E,K,N]` (abc), or for `+packed` recipes `tag.any` reordered once (outside the timing) into the layout the pd picks: x8:p8 / x4:p8k2 code panels decoded in the microkernel (issue 12; the int8 path widens the same panels), f32:p8 for floats; their bytes are that layout\'s.');
  const info: RunInfo = {
    command: `npm run scales${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    date: new Date().toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'),
    node: process.version, cores: availableParallelism(), threads, commit: gitCommit(), workload: workloadText, sizes: w.sizes, outliers: outlierText,
    totalSeconds, flops, selfTest: selfTestText, notes,
  };
  console.log('');
  console.log(terminalTable(results.filter((r) => r.status === 'ok')));
  const worked = results.filter((r) => r.status === 'ok' && r.message);
  if (worked.length) {
    console.log('\nlibrary failures worked around (the recipe then ran with threads=1):');
    for (const r of worked) console.log(`  ${r.recipe.id.padEnd(18)} ${r.message}`);
  }
  const notRun = results.filter((r) => r.status !== 'ok');
  if (notRun.length) {
    console.log('\nnot run by the library:');
    for (const r of notRun) console.log(`  ${r.recipe.id.padEnd(18)} ${r.stage}: ${r.message}  [tool emulation: rel.Frob ${r.emulated ? r.emulated.relFro.toExponential(2) : "-"}]`);
  }
  console.log('\nchecks:');
  for (const c of checks) console.log(`  ${c.pass === undefined ? 'n/a ' : c.pass ? 'pass' : 'FAIL'}  ${c.name}: ${c.detail}`);
  if (!flags.has('no-write')) {
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'scales.md'), markdown(results, checks, info));
    writeFileSync(join(outDir, 'scales.html'), html(results, checks, info));
    const jsonPath = flags.get('json');
    if (jsonPath) writeFileSync(jsonPath, JSON.stringify({ info, checks, results }, null, 1));
    console.log(`\nwrote ${relative(process.cwd(), join(outDir, 'scales.md'))} and ${relative(process.cwd(), join(outDir, 'scales.html'))} (${totalSeconds.toFixed(0)} s total)`);
  }
}

/**
 * Median time of repeated executions. Fast implementations: warm-up, then at least 3 runs and up to
 * `--min-ms` (less when the budget is short). Slow ones (the reference, seconds per call): the first
 * (correctness) run counts as a sample, plus up to two more if the budget allows.
 */
async function timeRecipe(exec: () => Promise<void>, firstMs: number, allowMs: number): Promise<NonNullable<Result['time']>> {
  if (firstMs < 1000) {
    const t = await timeIt(exec, { warmup: 1, minRuns: 3, minMs: Math.max(150, Math.min(minMs, allowMs)), maxRuns: 100 });
    return { median: t.median, min: t.min, max: t.max, runs: t.runs };
  }
  const samples = [firstMs];
  const extra = Math.min(2, Math.floor(allowMs / firstMs));
  for (let i = 0; i < extra; i++) {
    const s = performance.now();
    await exec();
    samples.push(performance.now() - s);
  }
  return { median: median(samples), min: Math.min(...samples), max: Math.max(...samples), runs: samples.length };
}

/** Rows `rows` of a full [totalM, N] matrix as a compact [rows.length, N] matrix. */
function subRows(full: Float64Array, rows: Int32Array, N: number): Float64Array {
  const out = new Float64Array(rows.length * N);
  rows.forEach((m, i) => out.set(full.subarray(m * N, (m + 1) * N), i * N));
  return out;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
