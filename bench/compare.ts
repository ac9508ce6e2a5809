/**
 * `npm run compare`: the same MoE work through RFC Proposals #1, #2, #3 and today's per-expert loop.
 * Routing changes on every step. Checks the four outputs are bit-identical, measures setup and
 * primitive-descriptor creation, per-step host work and step time (medians), extra heap memory,
 * objects created and lines of user code (from examples/), and writes reports/compare.md,
 * reports/compare.html and rfcs/proposal-comparison.md.
 *   npm run compare -- [--threads=N] [--steps=S] [--workload=a,b] [--formats=f32,w8:dq,w4:dq] [--clock=wall|cpu] [--engine=cpu|gpu] [--spin-ms=1500] [--step-spin-ms=25]
 * `--formats`: f32 runs the examples (and the baseline); w8:dq / w4:dq / w4k32:dq / w8k32:dq run P#1, P#2 and P#3 on
 * s8 / s4 weights (per-column scales; `k32`: per 32-K block and column, bench/quant_bench.ts's formats of those names)
 * with dynamic int8 activations (bench/compare_dq.ts), each format's outputs checked bit-identical to its P#1's; on
 * the gpu engine each runs beside the same weights with f32 activations (`w8` / `w4` / `w4k32` / `w8k32` rows, which
 * the gpu engine also takes on their own), P#1 checked against the cpu engine's `:dq` / a float64 reference first
 * (bench/compare_gpu.ts). The cpu compare has no f32-activation rows for them: it refuses `w8` ... `w8k32`.
 * `--clock=cpu` (with --threads=1: the work runs in the calling thread) times by process CPU time, which a
 * time-shared core does not inflate.
 * (workloads: decode-e64, decode-e256, prefill-balanced-e8, prefill-skewed-e8, prefill-skewed-e64; rfcs/ is rewritten
 * only by a run of all of them; ci-decode and ci-prefill, small shapes for SwiftShader, run only when named)
 * `--engine=gpu` runs the same workloads on the gpu engine (bench/compare_gpu.ts) with a host-read-back
 * baseline, and writes reports/compare-gpu.md / .json instead.
 */
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Engine, Memory, Stream, dt, memory, objectCensus, tag } from '../src/index.js';
import { createBaseline } from '../examples/baseline-per-expert-loop.js';
import { createP1 } from '../examples/p1-grouped-memory.js';
import { createP2 } from '../examples/p2-offsets-attr.js';
import { createP3 } from '../examples/p3-pointer-array.js';
import type { MoeShape, ProposalFactory, ProposalRunner } from '../examples/proposals_harness.js';
import { QUANT_WEIGHTS_FORMATS, createP1Dq, createP2Dq, createP3Dq, dqWeightsData, type DqFactory, type QuantWeightsFormat } from './compare_dq.js';
import { fillRandom } from './timing.js';
import { routeZipf } from './workloads.js';

interface CompareWorkload {
  name: string;
  tokens: number;
  topk: number;
  E: number;
  K: number;
  N: number;
  zipf: number;
  description: string;
}

const WORKLOADS: CompareWorkload[] = [
  { name: 'decode-e64', tokens: 8, topk: 6, E: 64, K: 1024, N: 1408, zipf: 0.6, description: 'decode: 8 tokens, top-6 of 64 experts, K=1024 N=1408' },
  { name: 'decode-e256', tokens: 4, topk: 8, E: 256, K: 512, N: 512, zipf: 0.6, description: 'decode: 4 tokens, top-8 of 256 experts, K=512 N=512' },
  { name: 'prefill-balanced-e8', tokens: 256, topk: 2, E: 8, K: 1024, N: 1408, zipf: 0, description: 'prefill: 256 tokens, top-2 of 8, uniform routing, K=1024 N=1408' },
  { name: 'prefill-skewed-e8', tokens: 256, topk: 2, E: 8, K: 1024, N: 1408, zipf: 1.5, description: 'prefill: 256 tokens, top-2 of 8, Zipf(1.5) routing, K=1024 N=1408' },
  { name: 'prefill-skewed-e64', tokens: 256, topk: 6, E: 64, K: 1024, N: 704, zipf: 1.0, description: 'prefill: 256 tokens, top-6 of 64, Zipf(1.0) routing, K=1024 N=704' },
];

/**
 * Shapes for a software rasterizer (SwiftShader in CI): chosen only by name (`--workload=ci-decode,ci-prefill`),
 * never by default. N off the kernels' tiles; K an odd multiple of 32, the `k32` formats' block (off the dot4
 * GEMM's 64-wide K slice; a whole number of the f32 tiled GEMM's 16-wide ones, which K = 200 / 136 were not);
 * ci-decode is all gemv (at most 2 rows per expert), ci-prefill takes the tiled GEMM and has experts of no rows.
 */
const CI_WORKLOADS: CompareWorkload[] = [
  { name: 'ci-decode', tokens: 4, topk: 2, E: 8, K: 224, N: 72, zipf: 0.6, description: 'CI decode: 4 tokens, top-2 of 8 experts, K=224 N=72' },
  { name: 'ci-prefill', tokens: 48, topk: 2, E: 6, K: 160, N: 88, zipf: 1.5, description: 'CI prefill: 48 tokens, top-2 of 6, Zipf(1.5) routing, K=160 N=88' },
];

const PROPOSALS: ReadonlyArray<readonly [string, ProposalFactory, string]> = [
  ['P1 grouped memory', createP1, 'p1-grouped-memory.ts'],
  ['P2 offsets attr', createP2, 'p2-offsets-attr.ts'],
  ['P3 pointer array', createP3, 'p3-pointer-array.ts'],
  ['baseline loop', createBaseline, 'baseline-per-expert-loop.ts'],
];

/** The `:dq` rows: the weights of each format (`w8:dq`: QUANT_WEIGHTS_FORMATS' `w8`), and the factories (user code marked by `p1` / `p2` / `p3` in compare_dq.ts). */
const DQ_FORMATS: Readonly<Record<string, QuantWeightsFormat>> = Object.fromEntries(Object.entries(QUANT_WEIGHTS_FORMATS).map(([name, f]) => [`${name}:dq`, f]));
/** The default `:dq` formats, also the RFC's (bench/proposal-comparison.template.md). */
const DEFAULT_DQ_FORMATS = ['w8:dq', 'w4:dq'];
const DQ_PROPOSALS: ReadonlyArray<readonly [string, DqFactory, string]> = [
  ['P1 grouped memory', createP1Dq, 'p1'],
  ['P2 offsets attr', createP2Dq, 'p2'],
  ['P3 pointer array', createP3Dq, 'p3'],
];

const args = new Map(process.argv.slice(2).map((a) => {
  const [k, v] = a.replace(/^--/, '').split('=');
  return [k, v ?? 'true'] as const;
}));
const threads = Number(args.get('threads') ?? availableParallelism());
/** This run's command line, quoted in the reports. */
const command = `npm run compare${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
const steps = Number(args.get('steps') ?? 12);
const KNOWN_OPTIONS = ['threads', 'steps', 'workload', 'formats', 'clock', 'engine', 'spin-ms', 'step-spin-ms'];
for (const k of args.keys()) if (!KNOWN_OPTIONS.includes(k)) throw new Error(`compare: unknown option --${k} (options: ${KNOWN_OPTIONS.map((o) => `--${o}`).join(', ')})`);
const chosen = (args.get('workload') ?? WORKLOADS.map((w) => w.name).join(',')).split(',');
const KNOWN_WORKLOADS = [...WORKLOADS, ...CI_WORKLOADS];
for (const c of chosen) if (!KNOWN_WORKLOADS.some((w) => w.name === c)) throw new Error(`compare: unknown workload '${c}' (workloads: ${KNOWN_WORKLOADS.map((w) => w.name).join(', ')})`);
const chosenWorkloads = KNOWN_WORKLOADS.filter((w) => chosen.includes(w.name));
/** rfcs/proposal-comparison.md quotes every workload: it is rewritten only by a run of all of them. */
const allWorkloads = WORKLOADS.every((w) => chosen.includes(w.name)) && chosenWorkloads.length === WORKLOADS.length;
const engineKind = args.get('engine') ?? 'cpu';
if (engineKind !== 'cpu' && engineKind !== 'gpu') throw new Error(`--engine must be cpu or gpu, got '${engineKind}'`);
const formats = (args.get('formats') ?? ['f32', ...DEFAULT_DQ_FORMATS].join(',')).split(',');
for (const f of formats) {
  if (f !== 'f32' && !Object.hasOwn(DQ_FORMATS, f) && !Object.hasOwn(QUANT_WEIGHTS_FORMATS, f)) throw new Error(`compare: unknown format '${f}' (formats: f32, ${[...Object.keys(QUANT_WEIGHTS_FORMATS), ...Object.keys(DQ_FORMATS)].join(', ')})`);
  // (the cpu rows of integer weights are P#1-P#3 :dq, compare_dq.ts: f32 activations on them run on the gpu engine only)
  if (engineKind === 'cpu' && Object.hasOwn(QUANT_WEIGHTS_FORMATS, f)) throw new Error(`compare: format '${f}' (f32 activations) runs with --engine=gpu only; the cpu engine runs its weights with dynamic int8 activations: '${f}:dq'`);
  const kBlock = (DQ_FORMATS[f] ?? QUANT_WEIGHTS_FORMATS[f])?.kBlock;
  for (const w of chosenWorkloads) if (kBlock && w.K % kBlock !== 0) throw new Error(`compare: format '${f}' scales blocks of ${kBlock} rows of K; workload '${w.name}' has K = ${w.K}, not a multiple of ${kBlock}`);
}
const clock = args.get('clock') ?? 'wall';
if (clock !== 'wall' && clock !== 'cpu') throw new Error(`--clock must be wall or cpu, got '${clock}'`);
// (process CPU time counts every thread: a step's time only when the work runs in the calling thread)
if (clock === 'cpu' && threads !== 1) throw new Error('compare: --clock=cpu needs --threads=1');
const clockMs = clock === 'cpu' ? (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
} : (): number => performance.now();

interface Result {
  workload: string;
  proposal: string;
  /** f32, or a `:dq` format: the outputs of one format are checked against its first proposal's. */
  format: string;
  setup_ms: number;
  pd_setup_ms: number;
  pd_per_step_ms: number;
  host_ms: number;
  step_ms: number;
  extra_heap_bytes: number;
  setup_objects: number;
  objects_per_step: number;
  loc: number;
  identical: boolean;
}

function median(a: number[]): number {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)];
}

function objects(c: ReturnType<typeof objectCensus>): number {
  return c.memory_desc + c.memory + c.attr + c.primitive_desc + c.primitive;
}

/** Non-blank, non-comment lines between the user-code markers of an example (or those named `name`: `// user-code-begin name`). */
function linesOfUserCode(file: string, name?: string): number {
  const text = readFileSync(fileURLToPath(new URL(file.includes('/') ? file : `../examples/${file}`, import.meta.url)), 'utf8');
  const mark = name ? ` ${name}` : '';
  const body = text.slice(text.indexOf(`// user-code-begin${mark}`), text.indexOf(`// user-code-end${mark}`)).split('\n').slice(1);
  return body.map((l) => l.trim()).filter((l) => l && !l.startsWith('//')).length;
}

async function runWorkload(w: CompareWorkload): Promise<Result[]> {
  const eng = await Engine.create({ threads });
  eng.scratch(1 << 20); // size the shared kernel scratch up front so no proposal is charged for it
  const strm = new Stream(eng);
  const shape: MoeShape = { E: w.E, K: w.K, N: w.N, capacity: w.tokens * w.topk };
  const setups: { name: string; format: string; loc: number; make: () => ProposalRunner }[] = [];
  if (formats.includes('f32')) {
    const weights = Memory.create(memory.desc([w.E, w.K, w.N], dt.f32, tag.abc), eng);
    fillRandom(weights.values as Float32Array, 9, 0.05);
    for (const [name, factory, file] of PROPOSALS) setups.push({ name, format: 'f32', loc: linesOfUserCode(file), make: () => factory(eng, strm, shape, weights) });
  }
  for (const f of formats.filter((x) => Object.hasOwn(DQ_FORMATS, x))) {
    // integer codes (s4: -7..7) and per-column (per K-block) scales, shared by the three proposals (each packs its own copy)
    const fmt = DQ_FORMATS[f];
    const { codes, scales } = dqWeightsData(w.E, w.K, w.N, fmt);
    const weights = Memory.create(memory.desc([w.E, w.K, w.N], fmt.wdt, tag.abc), eng).write(codes);
    for (const [name, factory, mark] of DQ_PROPOSALS) setups.push({ name: `${name} ${f}`, format: f, loc: linesOfUserCode('../bench/compare_dq.ts', mark), make: () => factory(eng, strm, shape, weights, scales, fmt.kBlock) });
  }
  const routings = Array.from({ length: steps + 2 }, (_, s) => routeZipf(w.tokens, w.E, w.topk, w.zipf, 1000 + s));
  const tokens = new Float32Array(shape.capacity * w.K);
  fillRandom(tokens, 17);
  // Setup each proposal once (measured alone), then run the steps round-robin: every step runs all
  // of them in turn, so load drift on a shared machine hits them equally.
  const runs: { name: string; format: string; loc: number; run: ProposalRunner; setupMs: number; pdSetup: number; setupObjects: number; heap: number; host: number[]; total: number[]; pdStep: number; objStep: number }[] = [];
  for (const { name, format, loc, make } of setups) {
    const c0 = objectCensus();
    const h0 = eng.heap.usedBytes;
    const t0 = performance.now();
    const run = make();
    const setupMs = performance.now() - t0;
    const c1 = objectCensus();
    runs.push({ name, format, loc, run, setupMs, pdSetup: c1.pd_creation_ms - c0.pd_creation_ms, setupObjects: objects(c1) - objects(c0), heap: eng.heap.usedBytes - h0, host: [], total: [], pdStep: 0, objStep: 0 });
    await strm.wait(); // (the :dq setups' weight reorders)
  }
  for (let s = 0; s < routings.length; s++) {
    for (const r of runs) {
      r.run.srcValues.set(tokens);
      const cs = objectCensus();
      const hs = eng.heap.usedBytes;
      const a = clockMs();
      r.run.step(routings[s]);
      const b = clockMs();
      await strm.wait();
      const c = clockMs();
      const ce = objectCensus();
      r.heap += eng.heap.usedBytes - hs; // e.g. per-step primitives of the baseline
      if (s < 2) continue; // warm-up
      r.host.push(b - a);
      r.total.push(c - a);
      r.pdStep += ce.pd_creation_ms - cs.pd_creation_ms;
      r.objStep += objects(ce) - objects(cs);
    }
  }
  // Heap the proposal needs beyond the values of its src and dst buffers.
  const valuesBytes = 4 * shape.capacity * (w.K + w.N);
  const outputs = runs.map((r) => r.run.dstValues.slice(0, shape.capacity * w.N));
  const results: Result[] = runs.map((r) => ({
    workload: w.name, proposal: r.name, format: r.format, setup_ms: r.setupMs, pd_setup_ms: r.pdSetup,
    pd_per_step_ms: r.pdStep / steps, host_ms: median(r.host), step_ms: median(r.total),
    extra_heap_bytes: r.heap - valuesBytes, setup_objects: r.setupObjects,
    objects_per_step: r.objStep / steps, loc: r.loc, identical: true,
  }));
  // each format against its P#1 (P#3 :dq is bitwise P#1 :dq for the same rows)
  results.forEach((r, i) => {
    const ref = outputs[results.findIndex((x) => x.format === r.format)];
    r.identical = Buffer.from(outputs[i].buffer).equals(Buffer.from(ref.buffer)) && ref.some((v) => v !== 0) && ref.every(Number.isFinite);
  });
  eng.release();
  return results;
}

if (engineKind === 'gpu') {
  const { compareGpu } = await import('./compare_gpu.js');
  // each :dq format beside its weights with f32 activations (the same codes and scales), each variant once
  const names = [...new Set(formats.flatMap((f) => (Object.hasOwn(DQ_FORMATS, f) ? [f.replace(':dq', ''), f] : [f])))];
  const variants = names.map((f) => (f === 'f32' ? { format: f, wdt: dt.f32, dq: false } : { format: f, ...(DQ_FORMATS[f] ?? QUANT_WEIGHTS_FORMATS[f]), dq: Object.hasOwn(DQ_FORMATS, f) }));
  await compareGpu(chosenWorkloads, steps, { spinMs: Number(args.get('spin-ms') ?? 1500), stepSpinMs: Number(args.get('step-spin-ms') ?? 25) }, variants);
} else {
  await compareCpu();
}

/** The cpu engine comparison: all four proposals (and the :dq rows), reports and rfcs/proposal-comparison.md. */
async function compareCpu(): Promise<void> {
  const PAD = 20 + Math.max(0, ...formats.filter((f) => f !== 'f32').map((f) => f.length + 1));
  const all: Result[] = [];
  console.log(`groupdnn proposal comparison: threads ${threads}, ${steps} timed steps (routing changes every step), formats ${formats.join(', ')}, ${clock === 'cpu' ? 'process CPU time' : 'wall time'}, node ${process.version}`);
  for (const w of chosenWorkloads) {
    console.log(`\n${w.name}: ${w.description}`);
    console.log(`  ${'proposal'.padEnd(PAD)} ${'step ms'.padStart(9)} ${'host ms'.padStart(9)} ${'setup ms'.padStart(9)} ${'pd ms/step'.padStart(10)} ${'extra heap'.padStart(11)} ${'objs'.padStart(5)} ${'objs/step'.padStart(9)} ${'LoC'.padStart(4)}  identical`);
    for (const r of await runWorkload(w)) {
      all.push(r);
      console.log(`  ${r.proposal.padEnd(PAD)} ${r.step_ms.toFixed(3).padStart(9)} ${r.host_ms.toFixed(3).padStart(9)} ${r.setup_ms.toFixed(2).padStart(9)} ${r.pd_per_step_ms.toFixed(3).padStart(10)} ${String(r.extra_heap_bytes).padStart(11)} ${String(r.setup_objects).padStart(5)} ${r.objects_per_step.toFixed(1).padStart(9)} ${String(r.loc).padStart(4)}  ${r.identical ? 'yes' : 'NO'}`);
    }
  }
  if (all.some((r) => !r.identical)) {
    console.error('outputs differ between proposals');
    process.exitCode = 1;
  }

  mkdirSync(fileURLToPath(new URL('../reports/', import.meta.url)), { recursive: true });
  const stamp = `node ${process.version}, ${availableParallelism()} cores, threads ${threads}, ${steps} steps${clock === 'cpu' ? ', process CPU time' : ''}, ${new Date().toISOString().slice(0, 10)}`;
  writeFileSync(new URL('../reports/compare.md', import.meta.url), markdownReport(all, stamp));
  writeFileSync(new URL('../reports/compare.html', import.meta.url), htmlReport(all, stamp));
  writeFileSync(new URL('../reports/compare.json', import.meta.url), JSON.stringify({ stamp, results: all }, null, 1));
  if (allWorkloads) writeFileSync(new URL('../rfcs/proposal-comparison.md', import.meta.url), rfcFromTemplate(all, stamp));
  console.log(`\nwrote reports/compare.md, reports/compare.html, reports/compare.json${allWorkloads ? ', rfcs/proposal-comparison.md' : ' (rfcs/proposal-comparison.md is left as it was: it quotes every workload, and this run chose a subset)'}`);
}

/** Fills bench/proposal-comparison.template.md with this run's numbers. */
function rfcFromTemplate(rs: Result[], stampText: string): string {
  const tpl = readFileSync(new URL('./proposal-comparison.template.md', import.meta.url), 'utf8');
  const keys: Record<string, string> = { P1: 'P1 grouped memory', P2: 'P2 offsets attr', P3: 'P3 pointer array', BASE: 'baseline loop' };
  const pick = (prop: string, wl: string): Result | undefined => rs.find((r) => r.proposal === prop && r.workload === wl);
  const ms = (v: number | undefined): string => (v === undefined ? 'n/a' : `${v.toFixed(2)} ms`);
  let out = tpl;
  for (const [k, prop] of Object.entries(keys)) {
    const e64 = pick(prop, 'decode-e64');
    const e256 = pick(prop, 'decode-e256');
    out = out
      .replaceAll(`LOC_${k}`, String(e64?.loc ?? 'n/a'))
      .replaceAll(`OBJ_${k}`, e64 ? `${e64.setup_objects} / ${e64.objects_per_step.toFixed(0)} (E=64)${e256 ? `; ${e256.setup_objects} / ${e256.objects_per_step.toFixed(0)} (E=256)` : ''}` : 'n/a')
      .replaceAll(`HOST_${k}`, `${ms(e64?.host_ms)} (E=64)${e256 ? `, ${ms(e256.host_ms)} (E=256)` : ''}`)
      .replaceAll(`STEP_DEC_${k}`, `${ms(pick(prop, 'decode-e64')?.step_ms)} / ${ms(e256?.step_ms)}`)
      .replaceAll(`STEP_PRE_${k}`, ['prefill-balanced-e8', 'prefill-skewed-e8', 'prefill-skewed-e64'].map((w) => ms(pick(prop, w)?.step_ms)).join(' / '));
  }
  for (const k of ['P1', 'P2', 'P3'] as const) {
    const dq = DEFAULT_DQ_FORMATS.map((f) => `${f} ${['decode-e64', 'decode-e256', 'prefill-skewed-e64'].map((w) => ms(pick(`${keys[k]} ${f}`, w)?.step_ms)).join(' / ')}`);
    out = out.replaceAll(`STEP_DQ_${k}`, dq.join('; '));
  }
  const measured = markdownReport(rs, stampText).split('\n').slice(2).join('\n');
  return out.replace('MEASURED_TABLES', `Command: \`${command}\` (${stampText}).\n${measured}`);
}

function markdownReport(rs: Result[], stampText: string): string {
  const lines = [
    '# Proposal comparison (measured)',
    '',
    `Generated by \`${command}\` (${stampText}). Medians over the timed steps; the routing changes on every step.`,
    'step ms = host work + execution until `stream.wait()` resolves; host ms = time inside the step function (building',
    'objects, writing offsets, `execute` argument checks); pd ms/step = primitive-descriptor creation inside steps;',
    'extra heap = engine heap used beyond the src/dst values; objs = user-created descriptors, memory objects, attrs,',
    'pds and primitives at setup; objs/step = the same per step; LoC = lines of user code in `examples/`.',
    'Rows `w8:dq` / `w4:dq`: s8 / s4 weights (per-column scales; `w4k32:dq` / `w8k32:dq`: per 32-K block and column) with dynamic int8 activations',
    '(`attr.setDynamicQuantization`, bench/compare_dq.ts); their extra heap includes the packed weights their user',
    'code reorders, and bit-identical compares them with P1 of the same format.',
    '',
  ];
  for (const w of KNOWN_WORKLOADS.filter((x) => rs.some((r) => r.workload === x.name))) {
    lines.push(`## ${w.name}: ${w.description}`, '', '| proposal | step ms | host ms | setup ms | pd ms/step | extra heap B | objs | objs/step | LoC | bit-identical |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|');
    for (const r of rs.filter((x) => x.workload === w.name)) {
      lines.push(`| ${r.proposal} | ${r.step_ms.toFixed(3)} | ${r.host_ms.toFixed(3)} | ${r.setup_ms.toFixed(2)} | ${r.pd_per_step_ms.toFixed(3)} | ${r.extra_heap_bytes} | ${r.setup_objects} | ${r.objects_per_step.toFixed(1)} | ${r.loc} | ${r.identical ? 'yes' : 'NO'} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

function bars(title: string, rs: Result[], value: (r: Result) => number, unit: string): string {
  const ws = KNOWN_WORKLOADS.filter((x) => rs.some((r) => r.workload === x.name));
  const names = [...new Set(rs.map((r) => r.proposal))];
  const colors = ['#4e79a7', '#f28e2b', '#59a14f', '#bab0ac', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#e15759'];
  const groupH = names.length * 16 + 14, left = 150, width = 460;
  const h = ws.length * groupH + 40;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${left + width + 120}" height="${h}" font-family="sans-serif" font-size="11">`, `<text x="4" y="14" font-weight="bold" font-size="13">${title}</text>`];
  ws.forEach((w, wi) => {
    const group = rs.filter((r) => r.workload === w.name);
    const max = Math.max(...group.map(value), 1e-9);
    const y0 = 26 + wi * groupH;
    parts.push(`<text x="4" y="${y0 + groupH / 2}">${w.name}</text>`);
    group.forEach((r, i) => {
      const v = value(r);
      const bw = Math.max(1, (v / max) * width);
      const y = y0 + i * 16;
      parts.push(`<rect x="${left}" y="${y}" width="${bw.toFixed(1)}" height="13" fill="${colors[names.indexOf(r.proposal) % colors.length]}"><title>${r.proposal}: ${v.toFixed(3)} ${unit}</title></rect>`);
      parts.push(`<text x="${left + bw + 4}" y="${y + 10}">${r.proposal} ${v.toFixed(3)} ${unit}</text>`);
    });
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function htmlReport(rs: Result[], stampText: string): string {
  const md = markdownReport(rs, stampText);
  const table = md.split('\n').filter((l) => l.startsWith('|') || l.startsWith('## ')).map((l) => {
    if (l.startsWith('## ')) return `</table><h2>${l.slice(3)}</h2><table>`;
    if (l.startsWith('|---')) return '';
    const cells = l.split('|').slice(1, -1).map((c) => c.trim());
    const tagName = cells[0] === 'proposal' ? 'th' : 'td';
    return `<tr>${cells.map((c) => `<${tagName}>${c}</${tagName}>`).join('')}</tr>`;
  }).join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>groupdnn proposal comparison</title>
<style>body{font-family:sans-serif;max-width:1000px;margin:20px auto}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}</style></head><body>
<h1>RFC grouped-GEMM proposals: measured comparison</h1><p>${stampText}. Medians; routing changes every step; the outputs of each weights format checked bit-identical.</p>
${bars('Step time (host work + execution), ms — lower is better', rs, (r) => r.step_ms, 'ms')}
${bars('Host-side work per step, ms — lower is better', rs, (r) => r.host_ms, 'ms')}
${bars('Objects created per step', rs, (r) => r.objects_per_step, '')}
<table>${table}</table></body></html>
`;
}
