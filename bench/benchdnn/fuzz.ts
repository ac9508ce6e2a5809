/**
 * Seeded differential fuzz of groupdnn's matmul through the benchdnn driver:
 *   npx tsx bench/benchdnn/fuzz.ts --seed=S --count=N [--engine=cpu,gpu] [--verbose] [--list]
 * draws N random, valid benchdnn matmul lines (grouped M / K and dense shapes, data-type families,
 * tags, bias, scales / zero points, post-ops, fpmath, runtime dims) and runs each through the driver's
 * own functions (knobs -> problem -> runProblem, exact float64 reference) on every engine named, then
 * classifies each line (see `Verdict`). Exit status 1 when a line FAILED or crashed anywhere.
 * The gpu engine needs a Vulkan: without a GPU driver, VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json.
 */
import { pathToFileURL } from 'node:url';
import { parseDescriptor } from './descriptor.js';
import { createEngine, type AnyEngine, type EngineKind } from './engine.js';
import { runProblem, type Outcome, type RunContext } from './execute.js';
import { applyKnob } from './knobs.js';
import { problems, reproLine } from './problem.js';
import { defaultGlobalSettings, defaultMatmulSettings } from './settings.js';
import { stream } from './fill.js';

type Rand = () => number;

const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rand, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));
const chance = (r: Rand, p: number): boolean => r() < p;

/** A dimension: mostly small and awkward (not a multiple of 4 / 8 / 16 / 32), sometimes a round size. */
function dim(r: Rand, max: number): number {
  if (chance(r, 0.25)) return Math.min(max, pick(r, [1, 2, 3, 4, 8, 16, 32, 64, 128]));
  return int(r, 1, max);
}

/** Splits `total` over `G` groups: random, with empty groups, one group taking everything, or even. */
function partition(r: Rand, total: number, G: number): number[] {
  const sizes = new Array<number>(G).fill(0);
  const mode = r();
  if (mode < 0.2) {
    sizes[int(r, 0, G - 1)] = total;
    return sizes;
  }
  if (mode < 0.35) {
    for (let i = 0; i < total; i++) sizes[i % G]++;
    return sizes;
  }
  const empty = new Set<number>();
  for (let g = 0; g < G; g++) if (chance(r, 0.3)) empty.add(g);
  if (empty.size === G) empty.delete(int(r, 0, G - 1));
  const live = [...Array(G).keys()].filter((g) => !empty.has(g));
  for (let i = 0; i < total; i++) sizes[pick(r, live)]++;
  return sizes;
}

/** Divisors of `k` in `candidates` (K-block sizes of grouped scales / zero points). */
const blocksOf = (k: number, candidates: readonly number[]): number[] => candidates.filter((b) => b <= k && k % b === 0);

type ShapeKind = 'grouped_m' | 'grouped_k' | 'dense';
type Family = 'float' | 'weight_only' | 'w8a8' | 'fp8' | 'fp4';

interface Draft {
  kind: ShapeKind;
  /** Rank of dst for dense (2 or 3). */
  nd: number;
  K: number;
  family: Family;
}

const FLOATS = ['f32', 'bf16', 'f16'] as const;
const WO_WEIGHTS = ['s8', 'u8', 's4', 'u4', 'f8_e4m3', 'f8_e5m2', 'f4_e2m1'] as const;
const INT_WEIGHTS = ['s8', 'u8', 's4', 'u4'];

/** Mask bits of the weights' N dim / K and N dims (weights [G, K, N] for grouped M). */
function weiMasks(d: Draft): { col: number; kBlock: number } {
  if (d.kind === 'grouped_m') return { col: 5, kBlock: 7 };
  if (d.kind === 'grouped_k') return { col: 2, kBlock: 3 };
  return { col: 1 << (d.nd - 1), kBlock: (1 << (d.nd - 1)) | (1 << (d.nd - 2)) };
}

/** Scales / zero points of the weights: per column, or K blocks (GROUPS gKx1). */
function weightQuant(r: Rand, d: Draft, wdt: string): { scales: string; zp: string } {
  const { col, kBlock } = weiMasks(d);
  const blocks = d.kind === 'grouped_k' ? [] : blocksOf(d.K, [2, 4, 8, 16, 32, 64]);
  const sdt = pick(r, ['f32', 'f16', 'bf16']);
  let scales: string;
  let block: number | undefined;
  if (blocks.length && chance(r, 0.5)) {
    block = pick(r, blocks);
    scales = `wei:${kBlock}:${sdt}:${block}x1`;
  } else scales = chance(r, 0.85) ? `wei:${col}:${sdt}` : `wei:common:0.5`;
  let zp = '';
  if (INT_WEIGHTS.includes(wdt) && chance(r, 0.4)) {
    const zdt = pick(r, ['s8', 'u8', 's32']);
    zp = block !== undefined && chance(r, 0.5) ? `wei:${kBlock}:${zdt}:${block}x1` : `wei:${col}:${zdt}`;
  }
  return { scales, zp };
}

function dataTypes(r: Rand, d: Draft): { dt: string; scales: string[]; zps: string[] } {
  const scales: string[] = [], zps: string[] = [];
  const srcRow = d.kind === 'dense' ? 1 << (d.nd - 2) : 1;
  if (d.family === 'float') {
    const s = pick(r, FLOATS);
    const dst = chance(r, 0.3) ? 'f32' : s;
    if (d.kind === 'grouped_k' && chance(r, 0.3)) scales.push(pick(r, ['src:0+wei:0', 'dst:0', 'wei:0']));
    else if (chance(r, 0.2)) scales.push(pick(r, ['wei:common:2', 'src:common:0.5+wei:common:0.25']));
    return { dt: dst === s ? s : `${s}:${s}:${dst}`, scales, zps };
  }
  if (d.family === 'weight_only') {
    const s = pick(r, FLOATS);
    const w = pick(r, WO_WEIGHTS);
    const dst = chance(r, 0.3) ? 'f32' : s;
    if (chance(r, 0.9)) {
      const q = weightQuant(r, d, w);
      scales.push(q.scales);
      if (q.zp) zps.push(q.zp);
    }
    return { dt: `${s}:${w}:${dst}`, scales, zps };
  }
  if (d.family === 'w8a8') {
    const s = pick(r, ['s8', 'u8']);
    const dst = pick(r, ['f32', 'bf16', 'f16', 's8', 'u8', 's32']);
    const w = pick(r, ['s8', 's8', 's4', 'u8']);
    const { col, kBlock } = weiMasks(d);
    const parts: string[] = [];
    const blocks = blocksOf(d.K, [16, 32]);
    if (blocks.length && chance(r, 0.2)) {
      // K-block scales on both sides (src rows x K blocks, weights K blocks x columns).
      const b = pick(r, blocks);
      const srcBlock = d.kind === 'dense' ? (1 << (d.nd - 2)) | (1 << (d.nd - 1)) : 3;
      parts.push(`src:${srcBlock}:f16:1x${b}`, `wei:${kBlock}:f16:${b}x1`);
    } else {
      if (chance(r, 0.8)) parts.push(pick(r, [`src:${srcRow}`, 'src:common:0.5', d.kind === 'grouped_m' ? 'src:0' : 'src:common:2']));
      if (chance(r, 0.8)) parts.push(`wei:${col}`);
    }
    if (chance(r, 0.3)) parts.push(pick(r, ['dst:common:2', d.kind === 'grouped_m' ? 'dst:0' : 'dst:common:0.5']));
    if (parts.length) scales.push(parts.join('+'));
    const zp: string[] = [];
    if (chance(r, 0.3)) zp.push(pick(r, [`src:${srcRow}:${s}`, 'src:common:2']));
    if (['s8', 'u8', 's32'].includes(dst) && chance(r, 0.3)) zp.push(d.kind === 'grouped_m' && chance(r, 0.5) ? 'dst:0:s8' : 'dst:common:3');
    if (zp.length) zps.push(zp.join('+'));
    return { dt: `${s}:${w}:${dst}`, scales, zps };
  }
  const { col, kBlock } = weiMasks(d);
  const srcBlock = d.kind === 'dense' ? (1 << (d.nd - 2)) | (1 << (d.nd - 1)) : 3;
  if (d.family === 'fp8') {
    const t = pick(r, ['f8_e4m3', 'f8_e5m2']);
    const dst = pick(r, ['bf16', 'f32', 'f16']);
    const b32 = blocksOf(d.K, [32]);
    if (b32.length && chance(r, 0.4)) scales.push(`src:${srcBlock}:e8m0:1x32+wei:${kBlock}:e8m0:32x1`);
    else if (chance(r, 0.6)) scales.push(`src:${srcRow}+wei:${col}`);
    return { dt: `${t}:${t}:${dst}`, scales, zps };
  }
  // fp4: block scales (K a multiple of the block: the generator picks such K for this family).
  const dst = pick(r, ['bf16', 'f32']);
  const b = pick(r, blocksOf(d.K, [16, 32]));
  scales.push(b === 16 ? `src:${srcBlock}:f8_e4m3:1x16+wei:${kBlock}:f8_e4m3:16x1` : `src:${srcBlock}:e8m0:1x32+wei:${kBlock}:e8m0:32x1`);
  return { dt: `f4_e2m1:f4_e2m1:${dst}`, scales, zps };
}

const ELTWISE: readonly string[] = [
  'relu', 'relu:0.5', 'gelu_erf', 'gelu_tanh', 'swish:1', 'swish:0.5', 'logistic', 'tanh', 'linear:0.5:1', 'linear:2:-3',
  'clip:-3:6', 'clip_v2:-2:2', 'abs', 'square', 'exp', 'elu:0.5', 'sqrt', 'soft_relu:1', 'soft_relu:0.5', 'log',
  'pow:1:2', 'pow:0.5:3', 'round', 'linear:0.25:0.5+round', 'mish', 'hardswish:0.25:0.5', 'hardsigmoid:0.25:0.5',
  'relu_dst:0.5', 'tanh_dst', 'elu_dst:1', 'logistic_dst', 'exp_dst', 'sqrt_dst', 'clip_v2_dst:-1:3',
];
/** Eltwise algorithms whose f32 result is rounded (compare.ts's transcendental ones, and sqrt). */
const INEXACT = /^(eltwise_)?(gelu|swish|logistic|tanh|exp|elu|sqrt|soft_relu|log|pow|mish|hardswish|hardsigmoid)/;
const SENSITIVE = /round|(^|\+)(eltwise_)?(log|sqrt|exp|pow)(_dst)?($|:|\+)/;
const BINARY_DT = ['f32', 'f32', 'bf16', 'f16', 's8', 'u8', 's32'];

function postOp(r: Rand, d: Draft): string {
  const k = r();
  if (k < 0.45) {
    const e = pick(r, ELTWISE);
    return chance(r, 0.5) ? e : `eltwise_${e}`;
  }
  if (k < 0.55) return pick(r, ['sum', 'sum:0.5', 'sum:2']);
  const alg = pick(r, ['mul', 'add']);
  const bdt = pick(r, BINARY_DT);
  if (d.kind === 'grouped_m') {
    const mask = pick(r, ['0', '1', '2', '3', '3:grouped', 'per_oc', 'per_tensor', 'common']);
    return `${alg}:${bdt}:${mask}`;
  }
  const nd = d.kind === 'grouped_k' ? 3 : d.nd;
  return `${alg}:${bdt}:${int(r, 0, (1 << nd) - 1)}`;
}

function shape(r: Rand, d: Draft, G: number): { desc: string; grouped?: string } {
  const maxMNK = 200;
  let M = dim(r, maxMNK), N = dim(r, maxMNK);
  // Keep SwiftShader fast: at most ~300k multiply-adds per problem.
  while (M * d.K * N > 300_000) {
    if (M > N) M = Math.max(1, M >> 1);
    else N = Math.max(1, N >> 1);
  }
  if (d.kind === 'grouped_m') {
    if (chance(r, 0.03)) M = 0;
    const profile = chance(r, 0.15) ? pick(r, ['balanced', `balanced.${int(r, 1, 99)}`, 'hot', `hot.${int(r, 0, 100)}`, 'decode']) : undefined;
    const sizes = profile ?? partition(r, M, G).join('+');
    const hint = chance(r, 0.05) ? `:${M}` : '';
    const wei = chance(r, 0.05) ? `${d.K}x${N}` : `${G}x${d.K}x${N}`; // older files: KxN, G inserted
    return { desc: `${M}x${d.K}:${wei}`, grouped: `0:${G}:${sizes}${hint}` };
  }
  if (d.kind === 'grouped_k') {
    M = Math.min(M, 64);
    N = Math.min(N, 64);
    const sizes = chance(r, 0.1) ? 'balanced' : partition(r, d.K, G).join('+');
    return { desc: `${M}x${d.K}:${d.K}x${N}`, grouped: `1:${G}:${sizes}` };
  }
  if (d.nd === 2) return { desc: `${M}x${d.K}:${d.K}x${N}` };
  const B = int(r, 1, 4);
  const bs = chance(r, 0.3) ? 1 : B, bw = chance(r, 0.3) && bs !== 1 ? 1 : B;
  const m3 = Math.max(1, Math.floor(M / B)), n3 = Math.max(1, Math.floor(N / 2));
  return { desc: `${bs}x${m3}x${d.K}:${bw}x${d.K}x${n3}` };
}

function tags(r: Rand, d: Draft): string[] {
  const out: string[] = [];
  const t = (knob: string, xs: readonly string[]): void => {
    const v = pick(r, xs);
    if (v !== 'any') out.push(`--${knob}=${v}`);
  };
  if (d.kind === 'grouped_m') {
    t('stag', chance(r, 0.05) ? ['ba'] : ['any', 'ab']);
    t('wtag', ['any', 'abc', 'acb']);
    t('dtag', ['any', 'ab']);
  } else if (d.kind === 'grouped_k') {
    t('stag', ['any', 'ab']);
    t('wtag', ['any', 'ab']);
    t('dtag', ['any', 'abc', 'acb']);
  } else if (d.nd === 2) {
    t('stag', chance(r, 0.1) ? ['ba'] : ['any', 'ab']);
    t('wtag', ['any', 'ab', 'ba']);
    t('dtag', ['any', 'ab']);
  } else {
    t('stag', chance(r, 0.1) ? ['acb'] : ['any', 'abc']);
    t('wtag', ['any', 'abc', 'acb']);
    t('dtag', ['any', 'abc']);
  }
  return out;
}

/** One random, valid benchdnn matmul line (knobs then the problem descriptor; no comma lists). */
export function fuzzLine(r: Rand): string {
  const kind: ShapeKind = pick(r, ['grouped_m', 'grouped_m', 'grouped_m', 'grouped_k', 'dense', 'dense']);
  const family: Family = kind === 'grouped_k' ? 'float' : pick(r, ['float', 'float', 'weight_only', 'weight_only', 'w8a8', 'fp8', 'fp4']);
  let K = dim(r, 200);
  if (family === 'fp4') K = 16 * int(r, 1, 8);
  const d: Draft = { kind, nd: kind === 'dense' && chance(r, 0.35) ? 3 : kind === 'grouped_k' ? 3 : 2, K, family };
  const G = chance(r, 0.15) ? 1 : int(r, 2, 9);
  const knobs: string[] = [];
  const { dt, scales, zps } = dataTypes(r, d);
  if (dt !== 'f32') knobs.push(`--dt=${dt}`);
  knobs.push(...tags(r, d));
  const sh = shape(r, d, kind === 'grouped_k' ? Math.min(G, K) : G);
  if (sh.grouped) knobs.push(`--grouped=${sh.grouped}`);
  if (chance(r, 0.35)) {
    knobs.push(`--bia-dt=${pick(r, ['f32', 'f32', 'bf16', 'f16'])}`);
    const nd = kind === 'dense' ? d.nd : 3;
    if (kind !== 'grouped_m') {
      const mask = int(r, 0, (1 << nd) - 1);
      if (mask !== 2) knobs.push(`--bia_mask=${mask}`);
    }
  }
  if (kind === 'dense' && chance(r, 0.05)) {
    const letters = 'abcdefghijkl'.slice(0, d.nd);
    for (const k of ['stag', 'wtag', 'dtag']) if (!knobs.some((x) => x.startsWith(`--${k}=`))) knobs.push(`--${k}=${letters}`);
    knobs.push(`--runtime_dims_masks=${int(r, 1, 3)}:${int(r, 0, 3)}`);
  }
  if (scales.length) knobs.push(`--attr-scales=${scales.join('+')}`);
  if (zps.length) knobs.push(`--attr-zero-points=${zps.join('+')}`);
  if (chance(r, 0.55)) {
    const ops: string[] = [];
    for (let i = int(r, 1, 3); i > 0; i--) {
      const op = postOp(r, d);
      // round and log only on exact inputs: after an op whose f32 result is rounded, round decides on that
      // result's last bit (e^-20 / 4 + 0.5 is 0.5 in f32: round gives 0, the float64 reference 1) and log
      // of a result below f32's range is -Inf (soft_relu(-110) = e^-110 is 0 in f32; log: -110 in float64);
      // sqrt of a tail that is -1e-30 or -0 (gelu_tanh(-10)) is NaN or -0; exp and pow multiply their
      // input's relative error by its size (exp(exp(4.2)): an ulp of e^4.2 is 4e-6 of the result).
      if (SENSITIVE.test(op) && ops.some((o) => INEXACT.test(o))) continue;
      if (op.startsWith('sum') && ops.some((o) => o.startsWith('sum'))) continue; // oneDNN: one sum per chain
      ops.push(op);
    }
    if (ops.length) knobs.push(`--attr-post-ops=${ops.join('+')}`);
  }
  if (chance(r, 0.15)) knobs.push(`--attr-fpmath=${pick(r, ['strict', 'bf16', 'f16:true', 'any', 'bf16:false'])}`);
  return [...knobs, sh.desc].join(' ');
}

/** `count` lines from `seed` (line i depends on the seed and i only, so a run can be cut short or extended). */
export function fuzzLines(seed: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => fuzzLine(stream((seed * 0x9e3779b1 + i * 0x85ebca6b + 1) >>> 0)));
}

/** One engine's result for a line: the driver's outcome, or the exception it threw (a crash). */
export type EngineResult = Outcome | { readonly state: 'CRASH'; readonly reason: string };

export type Verdict =
  /** PASSED (or MISTRUSTED) on every engine. */
  | 'passed'
  /** FAILED on some engine: a bug unless the reference is wrong. */
  | 'failed'
  /** An exception escaped the driver. */
  | 'crash'
  /** The gpu engine refused what the cpu engine ran (issue 20). */
  | 'gpu_refused'
  /** Every engine refused it (UNIMPLEMENTED / INVALID_ARGUMENTS): a limit of the library or a generator bug. */
  | 'refused';

export interface LineResult {
  readonly line: string;
  readonly results: Partial<Record<EngineKind, EngineResult>>;
  readonly verdict: Verdict;
}

function verdictOf(results: Partial<Record<EngineKind, EngineResult>>): Verdict {
  const rs = Object.values(results);
  if (rs.some((o) => o.state === 'CRASH')) return 'crash';
  if (rs.some((o) => o.state === 'FAILED')) return 'failed';
  const ok = (o: EngineResult | undefined): boolean => o?.state === 'PASSED' || o?.state === 'MISTRUSTED';
  if (rs.every(ok)) return 'passed';
  if (results.gpu && results.cpu && ok(results.cpu)) return 'gpu_refused';
  return 'refused';
}

/**
 * Runs `line` (knobs then one descriptor, a fresh `--reset` state) on `engine` through the driver's own
 * pieces: applyKnob, parseDescriptor, problems, runProblem.
 */
export async function runLine(line: string, kind: EngineKind, engine: AnyEngine, perturb?: RunContext['perturb']): Promise<EngineResult> {
  try {
    const s = defaultMatmulSettings(), g = defaultGlobalSettings();
    g.engine = kind;
    const words = line.split(/\s+/);
    words.slice(0, -1).forEach((text, i) => applyKnob({ text, file: undefined, line: i + 1 }, s, g));
    const ps = [...problems(s, parseDescriptor(words[words.length - 1]))];
    if (ps.length !== 1) throw new Error(`fuzz: line makes ${ps.length} problems, expected 1`);
    return await runProblem(ps[0], { engine: () => Promise.resolve(engine), globals: g, seed: reproLine(ps[0], kind), perturb });
  } catch (e) {
    return { state: 'CRASH', reason: e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e) };
  }
}

export interface FuzzOptions {
  readonly engines: readonly EngineKind[];
  /** cpu engine threads (default 2). */
  readonly threads?: number;
  /** Called after each line (progress output). */
  readonly onLine?: (r: LineResult, index: number) => void;
  /** Test hook, see RunContext.perturb: changes the library's dst before the comparison. */
  readonly perturb?: RunContext['perturb'];
}

/** Runs every line on every engine (engines created once) and classifies each. */
export async function runFuzz(lines: readonly string[], opts: FuzzOptions): Promise<LineResult[]> {
  const engines = new Map<EngineKind, AnyEngine>();
  for (const k of opts.engines) engines.set(k, await createEngine(k, k === 'cpu' ? opts.threads ?? 2 : undefined));
  const out: LineResult[] = [];
  try {
    for (const [i, line] of lines.entries()) {
      const results: Partial<Record<EngineKind, EngineResult>> = {};
      for (const [k, e] of engines) results[k] = await runLine(line, k, e, opts.perturb);
      const r = { line, results, verdict: verdictOf(results) };
      out.push(r);
      opts.onLine?.(r, i);
    }
  } finally {
    for (const e of engines.values()) e.release();
  }
  return out;
}

/** A reason with its numbers blanked, to count distinct refusals. */
const reasonKey = (s: string | undefined): string => (s ?? '').replace(/\d+(\.\d+)?/g, '#');

function describe(r: LineResult): string {
  return Object.entries(r.results).map(([k, o]) => {
    const worst = o.state === 'FAILED' && 'worst' in o && o.worst ? ` worst dst[${o.worst.index}] exp:${o.worst.expected} got:${o.worst.got} (errors ${o.errors}/${o.total})` : '';
    const impl = 'impl' in o && o.impl ? ` [${o.impl}]` : '';
    return `    ${k}: ${o.state}${impl}${o.reason ? ` (${o.reason})` : ''}${worst}`;
  }).join('\n');
}

/** The summary and every non-passed line with its repro (`--engine=K --matmul LINE`). */
export function report(results: readonly LineResult[]): string[] {
  const out: string[] = [];
  const by = (v: Verdict): LineResult[] => results.filter((r) => r.verdict === v);
  out.push(`lines:${results.length} passed:${by('passed').length} failed:${by('failed').length} crash:${by('crash').length} gpu_refused:${by('gpu_refused').length} refused:${by('refused').length}`);
  for (const v of ['failed', 'crash', 'gpu_refused', 'refused'] as const) {
    for (const r of by(v)) {
      const bad = Object.entries(r.results).find(([, o]) => o.state !== 'PASSED' && o.state !== 'MISTRUSTED')?.[0] ?? 'cpu';
      out.push(`${v.toUpperCase()} __REPRO: ${bad === 'cpu' ? '' : `--engine=${bad} `}--matmul ${r.line}`);
      out.push(describe(r));
    }
  }
  const reasons = new Map<string, number>();
  for (const r of results) for (const [k, o] of Object.entries(r.results)) if (o.state === 'UNIMPLEMENTED' || o.state === 'INVALID_ARGUMENTS') {
    const key = `${k} ${o.state}: ${reasonKey(o.reason)}`;
    reasons.set(key, (reasons.get(key) ?? 0) + 1);
  }
  if (reasons.size) out.push('distinct refusals:', ...[...reasons].sort((a, b) => b[1] - a[1]).map(([k, n]) => `  ${n}x ${k}`));
  return out;
}

async function main(argv: readonly string[]): Promise<number> {
  const opt = (name: string, d: string): string => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? d;
  const seed = Number(opt('seed', '1')), count = Number(opt('count', '20'));
  const engines = opt('engine', 'cpu,gpu').split(',') as EngineKind[];
  if (engines.some((e) => e !== 'cpu' && e !== 'gpu') || !Number.isInteger(seed) || !(count >= 0)) {
    console.error('usage: fuzz.ts --seed=S --count=N [--engine=cpu,gpu] [--verbose] [--list: print the lines only]');
    return 2;
  }
  const verbose = argv.includes('--verbose');
  const lines = fuzzLines(seed, count);
  if (argv.includes('--list')) {
    lines.forEach((l) => console.log(l));
    return 0;
  }
  const results = await runFuzz(lines, {
    engines,
    onLine: (r, i) => {
      if (verbose) console.log(`${i}: ${r.verdict} ${r.line}`);
    },
  });
  report(results).forEach((l) => console.log(l));
  return results.some((r) => r.verdict === 'failed' || r.verdict === 'crash') ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
