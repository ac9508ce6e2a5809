/**
 * `npm run compare -- --engine=gpu`: the proposals comparison on the gpu engine (WebGPU), with the
 * baseline the RFC argues against: **host read-back** (map the group sizes to the host, then launch
 * one dense matmul per active expert, a pd per distinct row count, cached).
 *
 * Each step stands for one MoE layer call whose routing was computed on the device: before the timed
 * part, the step's group sizes (offsets for P#1 / P#2, rows for P#3, offsets for the baseline) and
 * the routed activations are written to device buffers and the queue is drained. The timed part is
 * what each API then costs: P#1 / P#2 / P#3 execute and `stream.wait()`; the baseline reads the sizes
 * back (`GpuMemory.readOffsets()`), executes one matmul per active expert and waits. Steps run all
 * four round-robin; medians. Writes reports/compare-gpu.md and reports/compare-gpu.json.
 *
 * Weights variants (`--formats`, GpuWeightsVariant): f32, or s8 / s4 codes with per-column scales or f32 scales per
 * 32-K block and column (bench/compare_dq.ts dqWeightsData) under f32 activations (`w8`, `w4`, `w4k32`, `w8k32`)
 * and with dynamic int8 activations (`attr.setDynamicQuantization`, `w8:dq` ... `w8k32:dq`); the four APIs run
 * each variant on the same data. Before the
 * timed steps, after the last warm-up step, P#1's output is checked against a float64 reference (the `:dq`
 * variants: the cpu engine's P#1 `:dq`, bench/compare_dq.ts, whose row quantization is the gpu's bit for bit: the
 * per-column formats match it to the bit, the K-block ones within tolerance, their block folds rounding in another
 * order, src/primitives/matmul/webgpu_dynamic_quant.ts) and the other three against P#1's.
 *
 * Clocks: the GPU is kept busy `spinMs` before each workload's timed steps and `stepSpinMs` before each
 * step (after its uploads), bench/gpu_clock_warmup.ts: an H200 drops its SM clock within a second of
 * idling, so without it a workload ran up to 2x slower after a faster one had left the GPU idle more.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import {
  ARG, Engine, GpuEngine, GpuMemory, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, matmul, memory, offsets, tag,
} from '../src/index.js';
import { fillRandom } from './timing.js';
import { createP1Dq, dqWeightsData, type QuantWeightsFormat } from './compare_dq.js';
import { routeZipf } from './workloads.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';

/** Milliseconds of sustained GPU work before each workload's timed steps, and before each step. */
export interface GpuCompareClocks {
  readonly spinMs: number;
  readonly stepSpinMs: number;
}

export interface GpuCompareWorkload {
  readonly name: string;
  readonly tokens: number;
  readonly topk: number;
  readonly E: number;
  readonly K: number;
  readonly N: number;
  readonly zipf: number;
  readonly description: string;
}

/**
 * The weights of one group of rows: f32, or integer codes with per-column scales (`kBlock`: per `kBlock` rows of K
 * and column); `dq`: dynamic int8 activations.
 */
export interface GpuWeightsVariant extends QuantWeightsFormat {
  /** The rows' label: f32, w8, w8:dq, w4, w4:dq, w4k32, w4k32:dq, w8k32, w8k32:dq. */
  readonly format: string;
  readonly dq: boolean;
}

const F32_ONLY: readonly GpuWeightsVariant[] = [{ format: 'f32', wdt: dt.f32, dq: false }];

export interface GpuCompareResult {
  workload: string;
  proposal: string;
  format: string;
  /** Median of execute (and, baseline, the read-back) through `stream.wait()`. */
  step_ms: number;
  /** Median time in the step before `stream.wait()` (baseline: includes awaiting the read-back). */
  host_ms: number;
  /** GPU dispatches per step (P#1 / P#2: schedule + GEMM; P#3: dims pass + one per expert; baseline: one per active expert). */
  dispatches: number;
  identical: boolean;
  /** max |out - P#1's| / max |P#1's| (0 when identical): kernels that sum K in another order (split-K GEMV, tiled GEMM) differ in the last bits. */
  maxRelDiff: number;
  /** P#1's row only: max |P#1 - reference| / max |reference| (float64, or the cpu engine's `:dq`). */
  refRelDiff?: number;
}

const PROPOSALS = ['P1 grouped memory', 'P2 offsets attr', 'P3 grouped_gemm', 'baseline host read-back'] as const;
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

function median(a: number[]): number {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)];
}

const rowsMd = (cols: number): ReturnType<typeof memory.desc> => memory.desc([RUNTIME_DIM_VAL, cols], dt.f32, tag.ab);

/** A GPUBuffer for `rows` f32 rows of `cols` (at least 16 bytes). */
function buffer(eng: GpuEngine, rows: number, cols: number): GPUBuffer {
  return eng.device.createBuffer({ size: Math.max(16, Math.ceil((rows * cols * 4) / 16) * 16), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
}

/** max |got - want| / max |want| (Infinity where one is NaN and the other not). */
function relDiff(got: Float32Array, want: Float32Array): number {
  const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0) || 1;
  let d = 0;
  for (let j = 0; j < want.length; j++) d = Math.max(d, Number.isNaN(got[j]) !== Number.isNaN(want[j]) ? Infinity : Math.abs(got[j] - want[j]));
  return d / scale;
}

/**
 * The float64 reference of P#1's rows (routed order): x [rows, K] times each expert's weights, each weight times
 * its scale (scales [E, N], or [E, K / kBlock, N]).
 */
function referenceOf(x: Float32Array, sizes: readonly number[], wAll: Float32Array, scales: Float32Array | undefined, K: number, N: number, kBlock = K): Float32Array {
  const out = new Float32Array(x.length / K * N), acc = new Float64Array(N);
  const blocks = K / kBlock;
  let r = 0;
  sizes.forEach((m, e) => {
    for (const end = r + m; r < end; r++) {
      acc.fill(0);
      for (let k = 0; k < K; k++) {
        const v = x[r * K + k], w0 = (e * K + k) * N, s0 = (e * blocks + Math.floor(k / kBlock)) * N;
        for (let n = 0; n < N; n++) acc[n] += v * wAll[w0 + n] * (scales ? scales[s0 + n] : 1);
      }
      for (let n = 0; n < N; n++) out[r * N + n] = acc[n];
    }
  });
  return out;
}

/** P#1 `:dq` of the same weights, scales and rows on the cpu engine (bench/compare_dq.ts): the gpu's reference. */
async function cpuDqReference(x: Float32Array, sizes: readonly number[], { wdt, kBlock }: QuantWeightsFormat, wAll: Float32Array, scales: Float32Array, K: number, N: number): Promise<Float32Array> {
  const E = sizes.length, cpu = await Engine.create({ threads: 1 });
  try {
    const strm = new Stream(cpu);
    const weights = Memory.create(memory.desc([E, K, N], wdt, tag.abc), cpu).write(wAll);
    const run = createP1Dq(cpu, strm, { E, K, N, capacity: x.length / K }, weights, scales, kBlock);
    run.srcValues.set(x);
    run.step(sizes);
    await strm.wait();
    return run.dstValues.slice(0, x.length / K * N);
  } finally {
    cpu.release();
  }
}

async function runWorkload(eng: GpuEngine, w: GpuCompareWorkload, steps: number, clocks: GpuCompareClocks, v: GpuWeightsVariant): Promise<GpuCompareResult[]> {
  const { E, K, N } = w;
  const strm = new Stream(eng);
  const cap = w.tokens * w.topk;
  const routings = Array.from({ length: steps + 2 }, (_, s) => routeZipf(w.tokens, E, w.topk, w.zipf, 1000 + s));
  // Per-expert capacity: the most rows any step routes to it (P#3 and the baseline keep one buffer per expert).
  const capE = Array.from({ length: E }, (_, e) => Math.max(1, ...routings.map((r) => r[e])));
  // Row r of expert e has the same values under every layout: per-expert host arrays, concatenated per step for P#1 / P#2.
  const xs = capE.map((c, e) => {
    const a = new Float32Array(c * K);
    fillRandom(a, 17 + e);
    return a;
  });
  // f32 weights, or integer codes with per-column scales [E, N] or per K-block [E, K / kBlock, N] (the cpu compare's :dq data)
  const quant = v.wdt !== dt.f32 ? dqWeightsData(E, K, N, v) : undefined;
  const wAll = quant?.codes ?? new Float32Array(E * K * N);
  if (!quant) fillRandom(wAll, 9, 0.05);
  const kBlocks = v.kBlock ? K / v.kBlock : 0;
  /**
   * The variant's attributes: weights scales on `arg` of `ndims` dims (per column: the mask of N and of the
   * expert dim if any; K-block: of K too, groups of kBlock rows of K), dynamic int8 activations.
   */
  const attrOf = (arg: number, ndims: 2 | 3, a = new PrimitiveAttr()): PrimitiveAttr => {
    const kBit = 1 << (ndims - 2), perColumn = ndims === 3 ? 5 : 2;
    if (quant && v.kBlock) a.setScales(arg, perColumn | kBit, ndims === 3 ? [1, v.kBlock, 1] : [v.kBlock, 1], dt.f32);
    else if (quant) a.setScales(arg, perColumn);
    if (v.dq) a.setDynamicQuantization(ARG.SRC, dt.s8);
    return a;
  };

  // P#1: grouped src / dst sharing one device offsets buffer.
  const src1Md = memory.desc.grouped([cap, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dst1Md = memory.desc.grouped([cap, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const wei = Memory.create(memory.desc([E, K, N], v.wdt, tag.abc), eng).write(wAll);
  const pd1 = new matmul.PrimitiveDesc(eng, src1Md, wei.desc, dst1Md, attrOf(ARG.WEIGHTS, 3));
  const p1 = new matmul.Primitive(pd1);
  const src1 = Memory.create(src1Md, eng);
  const dst1 = Memory.create(dst1Md, eng, [undefined, src1.buffers[1]]);
  // The [E, N] ([E, K / kBlock, N]) scales of P#1 / P#2, and each expert's [N] ([K / kBlock, N]) of P#3 and the baseline.
  const sc = quant && Memory.create(pd1.queryMd('scales:weights')!, eng).write(quant.scales);
  const scMd = kBlocks ? memory.desc([kBlocks, N], dt.f32, tag.ab) : memory.desc([N], dt.f32, tag.a);
  const perExpert = Math.max(kBlocks, 1) * N;
  const scE = Array.from({ length: quant ? E : 0 }, (_, e) => Memory.create(scMd, eng).write(quant!.scales.subarray(e * perExpert, (e + 1) * perExpert)));
  const scArg = (s: GpuMemory | undefined, arg: number = ARG.WEIGHTS): Record<number, GpuMemory> => (s ? { [ARG.ATTR_SCALES | arg]: s } : {});
  // P#2: plain src / dst and the grouped-offsets attribute.
  const pd2 = new matmul.PrimitiveDesc(eng, memory.desc([cap, K], dt.f32, tag.ab), wei.desc, memory.desc([cap, N], dt.f32, tag.ab), attrOf(ARG.WEIGHTS, 3, new PrimitiveAttr().setGroupedOffsets(ARG.SRC, E, dt.s32)));
  const p2 = new matmul.Primitive(pd2);
  const src2 = Memory.create(pd2.queryMd('src')!, eng), dst2 = Memory.create(pd2.queryMd('dst')!, eng);
  const offs2 = Memory.create(pd2.queryMd('grouped_offsets')!, eng);
  // P#3 and the baseline: one src buffer per expert (shared), one dst buffer per expert each.
  const weis = Array.from({ length: E }, (_, e) => Memory.create(memory.desc([K, N], v.wdt, tag.ab), eng).write(wAll.subarray(e * K * N, (e + 1) * K * N)));
  const srcBufs = capE.map((c, e) => {
    const b = buffer(eng, c, K);
    eng.device.queue.writeBuffer(b, 0, xs[e]);
    return b;
  });
  const dst3Bufs = capE.map((c) => buffer(eng, c, N)), dstBBufs = capE.map((c) => buffer(eng, c, N));
  const dimsMd = memory.desc([E], dt.s32, tag.x);
  const pd3 = new grouped_gemm.PrimitiveDesc(eng, capE.map(() => rowsMd(K)), capE.map(() => memory.desc([K, N], v.wdt, tag.ab)), capE.map(() => rowsMd(N)), dimsMd, attrOf(ARG.MULTIPLE_WEIGHTS, 2));
  const p3 = new grouped_gemm.Primitive(pd3);
  const dims = Memory.create(dimsMd, eng);
  const a3: Record<number, GpuMemory> = { [ARG.RUNTIME_DIMS]: dims };
  for (let e = 0; e < E; e++) {
    a3[ARG.MULTIPLE_SRC + e] = Memory.create(rowsMd(K), eng, srcBufs[e]);
    a3[ARG.MULTIPLE_WEIGHTS + e] = weis[e];
    a3[ARG.MULTIPLE_DST + e] = Memory.create(rowsMd(N), eng, dst3Bufs[e]);
    Object.assign(a3, scArg(scE[e], ARG.MULTIPLE_WEIGHTS + e));
  }
  // Baseline: reads P#1's device offsets back each step; a dense pd per row count.
  const densePrims = new Map<number, matmul.Primitive>();
  const dense = (M: number): matmul.Primitive => {
    let p = densePrims.get(M);
    if (!p) densePrims.set(M, (p = new matmul.Primitive(new matmul.PrimitiveDesc(eng, memory.desc([M, K], dt.f32, tag.ab), memory.desc([K, N], v.wdt, tag.ab), memory.desc([M, N], dt.f32, tag.ab), attrOf(ARG.WEIGHTS, 2)))));
    return p;
  };

  // (the :dq passes: P#1 / P#2 one quantization dispatch, P#3 one per expert unless every expert runs the gemv
  // (capacity up to gemvDenseMaxRows), which then quantizes its own rows (gemvQuantSrc), the baseline one per matmul)
  const dq = v.dq ? 1 : 0;
  const dq3 = v.dq && !(gpuKernelTuning.gemvQuantSrc && capE.every((c) => c <= gpuKernelTuning.gemvDenseMaxRows)) ? 1 : 0;
  const timing = PROPOSALS.map(() => ({ host: [] as number[], total: [] as number[], dispatches: 0 }));
  const stepFns: (() => Promise<number>)[] = [
    async () => {
      p1.execute(strm, { [ARG.SRC]: src1, [ARG.WEIGHTS]: wei, [ARG.DST]: dst1, ...scArg(sc) });
      return 2 + dq;
    },
    async () => {
      p2.execute(strm, { [ARG.SRC]: src2, [ARG.WEIGHTS]: wei, [ARG.DST]: dst2, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs2, ...scArg(sc) });
      return 2 + dq;
    },
    async () => {
      p3.execute(strm, a3);
      return 1 + E * (1 + dq3);
    },
    async () => {
      const o = await src1.readOffsets(); // the host read-back the device-side proposals avoid
      let n = 0;
      for (let e = 0; e < E; e++) {
        const M = o[e + 1] - o[e];
        if (M === 0) continue;
        const md = (cols: number): ReturnType<typeof memory.desc> => memory.desc([M, cols], dt.f32, tag.ab);
        dense(M).execute(strm, { [ARG.SRC]: Memory.create(md(K), eng, srcBufs[e]), [ARG.WEIGHTS]: weis[e], [ARG.DST]: Memory.create(md(N), eng, dstBBufs[e]), ...scArg(scE[e]) });
        n++;
      }
      return n * (1 + dq);
    },
  ];
  // After the last warm-up step (before any timed one): P#1 against the reference, the others against P#1.
  let checks: { identical: boolean; maxRelDiff: number }[] = [];
  let refRelDiff = Infinity;
  const check = async (sizes: readonly number[], x: Float32Array): Promise<void> => {
    const offs = offsets.fromSizes(sizes);
    const used = offs[E] * N * 4;
    const concat = async (bufs: GPUBuffer[]): Promise<Uint8Array> => {
      const out = new Uint8Array(used);
      for (let e = 0; e < E; e++) {
        const m = Memory.create(rowsMd(N), eng, bufs[e]);
        out.set((await m.readBytes(0)).subarray(0, sizes[e] * N * 4), offs[e] * N * 4);
      }
      return out;
    };
    const outs = [(await dst1.readBytes(0)).subarray(0, used), (await dst2.readBytes(0)).subarray(0, used), await concat(dst3Bufs), await concat(dstBBufs)];
    const ref = Buffer.from(outs[0]);
    const asF32 = (o: Uint8Array): Float32Array => new Float32Array(o.slice().buffer);
    checks = outs.map((o) => ({ identical: Buffer.from(o).equals(ref), maxRelDiff: relDiff(asF32(o), asF32(outs[0])) }));
    const rows = x.subarray(0, offs[E] * K);
    const want = v.dq ? await cpuDqReference(rows, sizes, v, wAll, quant!.scales, K, N) : referenceOf(rows, sizes, wAll, quant?.scales, K, N, v.kBlock);
    refRelDiff = relDiff(asF32(outs[0]), want);
  };
  for (let s = 0; s < routings.length; s++) {
    const sizes = routings[s];
    const offs = offsets.fromSizes(sizes);
    // The routing's outputs land on the device (untimed): activations for the contiguous layouts, sizes for all.
    const x = new Float32Array(cap * K);
    sizes.forEach((m, e) => x.set(xs[e].subarray(0, m * K), offs[e] * K));
    src1.write(x).writeOffsets(offs);
    src2.write(x);
    offs2.write(offs);
    dims.write(sizes);
    await strm.wait();
    // After the warm-up steps (pipelines compiled), sustained clocks for the timed ones.
    if (s === 2) await keepGpuBusy(eng, clocks.spinMs);
    if (s >= 2) await keepGpuBusy(eng, clocks.stepSpinMs);
    for (let i = 0; i < stepFns.length; i++) {
      const a = performance.now();
      const n = await stepFns[i]();
      const b = performance.now();
      await strm.wait();
      const c = performance.now();
      if (s < 2) continue; // warm-up: pipelines compile on first use
      timing[i].host.push(b - a);
      timing[i].total.push(c - a);
      timing[i].dispatches += n / steps;
    }
    if (s === 1) await check(sizes, x);
  }
  const results = PROPOSALS.map((proposal, i) => ({
    workload: w.name, proposal: v.format === 'f32' ? proposal : `${proposal} ${v.format}`, format: v.format, step_ms: median(timing[i].total), host_ms: median(timing[i].host),
    dispatches: timing[i].dispatches, ...checks[i], ...(i === 0 ? { refRelDiff } : {}),
  }));
  for (const p of [p1, p2, p3, ...densePrims.values()]) p.destroy();
  for (const m of [wei, src1, dst1, src2, dst2, offs2, dims, ...weis, ...(sc ? [sc] : []), ...scE]) m.free();
  for (const b of [...srcBufs, ...dst3Bufs, ...dstBBufs]) b.destroy();
  return results;
}

/** Largest max |difference| / max |P1 output| a proposal may show (f32 sums of up to a few thousand terms in another order). */
const AGREE = 1e-5;

/** P#1's row: its difference from the reference; the others': from P#1's. */
function agreement(r: GpuCompareResult): string {
  if (r.refRelDiff !== undefined) return `ref ${r.refRelDiff.toExponential(1)}${r.refRelDiff > AGREE ? ' (BEYOND)' : ''}`;
  return r.identical ? 'same bits' : `${r.maxRelDiff.toExponential(1)}${r.maxRelDiff > AGREE ? ' (BEYOND)' : ''}`;
}

const beyond = (r: GpuCompareResult): boolean => r.maxRelDiff > AGREE || (r.refRelDiff ?? 0) > AGREE;

function markdown(rs: GpuCompareResult[], workloads: readonly GpuCompareWorkload[], stamp: string): string {
  const lines = [
    '# Proposal comparison on the gpu engine (measured)',
    '',
    `Generated by \`npm run compare -- --engine=gpu\` (${stamp}). Medians over the timed steps; the routing changes on every`,
    'step and its sizes are already on the device when a step starts. step ms = execute until `stream.wait()` resolves;',
    'host ms = time before `wait()` (the baseline awaits its read-back there); dispatches = GPU dispatches per step.',
    '`P1 / baseline` < 1 means the device-side offsets are faster than reading the sizes back first. `vs P1`: the',
    'same bits, or max |difference| / max |P1 output| where a proposal\'s kernel sums K in another order (at decode',
    'all four take the GEMV, P3 and the baseline in its dense form; an expert or a matmul of more rows takes the tiled',
    'GEMM, whose K order can differ); P1\'s row shows `ref`: the same measure against a float64 reference (`:dq` rows:',
    'the cpu engine\'s P1 `:dq`), checked after the warm-up steps, before the timed ones; the run fails beyond ' + AGREE + '.',
    'Rows `w8` / `w4`: s8 / s4 weights with per-column scales under f32 activations (`w4k32` / `w8k32`: f32 scales per',
    '32-K block and column, bench/quant_bench.ts\'s formats of those names); `w8:dq` / `w4:dq` / `w4k32:dq` / `w8k32:dq`: the same',
    'weights with dynamic int8 activations (`attr.setDynamicQuantization`); `/ baseline` against the baseline of the',
    'same weights. The GPU is kept busy before each workload and step (sustained clocks, bench/gpu_clock_warmup.ts).',
    '',
  ];
  for (const w of workloads.filter((x) => rs.some((r) => r.workload === x.name))) {
    const group = rs.filter((r) => r.workload === w.name);
    const base = (r: GpuCompareResult): GpuCompareResult => group.find((b) => b.format === r.format && b.proposal.startsWith('baseline'))!;
    lines.push(`## ${w.name}: ${w.description}`, '', '| proposal | step ms | host ms | dispatches | / baseline | vs P1 |', '|---|---:|---:|---:|---:|---|');
    for (const r of group) lines.push(`| ${r.proposal} | ${r.step_ms.toFixed(3)} | ${r.host_ms.toFixed(3)} | ${r.dispatches.toFixed(1)} | ${(r.step_ms / base(r).step_ms).toFixed(2)} | ${agreement(r)} |`);
    lines.push('');
  }
  return lines.join('\n');
}

/** Runs the chosen workloads on a gpu engine and writes reports/compare-gpu.md / .json. */
export async function compareGpu(workloads: readonly GpuCompareWorkload[], steps: number, clocks: GpuCompareClocks = { spinMs: 1500, stepSpinMs: 25 }, variants: readonly GpuWeightsVariant[] = F32_ONLY): Promise<GpuCompareResult[]> {
  // Without a GPU driver Dawn runs on SwiftShader (Debian's chromium ships it), as in the tests.
  if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD)) process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  const eng = await Engine.create({ kind: 'gpu' });
  const stamp = `node ${process.version}, ${eng.adapterInfo}, ${steps} steps, formats ${variants.map((v) => v.format).join(', ')}, ${new Date().toISOString().slice(0, 10)}`;
  console.log(`groupdnn proposal comparison on the gpu engine: ${stamp}`);
  const all: GpuCompareResult[] = [];
  try {
    for (const w of workloads) {
      console.log(`\n${w.name}: ${w.description}`);
      // 'baseline host read-back' and its format, one space, one column of margin.
      const pad = 24 + Math.max(0, ...variants.filter((v) => v.format !== 'f32').map((v) => v.format.length + 2));
      console.log(`  ${'proposal'.padEnd(pad)} ${'step ms'.padStart(9)} ${'host ms'.padStart(9)} ${'dispatches'.padStart(10)}  vs P1`);
      for (const v of variants) {
        for (const r of await runWorkload(eng, w, steps, clocks, v)) {
          all.push(r);
          console.log(`  ${r.proposal.padEnd(pad)} ${r.step_ms.toFixed(3).padStart(9)} ${r.host_ms.toFixed(3).padStart(9)} ${r.dispatches.toFixed(1).padStart(10)}  ${agreement(r)}`);
        }
      }
    }
  } finally {
    eng.release();
  }
  if (all.some(beyond)) {
    console.error(`outputs differ from the reference or between proposals beyond ${AGREE} of the largest output`);
    process.exitCode = 1;
  }
  mkdirSync(new URL('../reports/', import.meta.url), { recursive: true });
  writeFileSync(new URL('../reports/compare-gpu.md', import.meta.url), markdown(all, workloads, stamp));
  writeFileSync(new URL('../reports/compare-gpu.json', import.meta.url), JSON.stringify({ stamp, results: all }, null, 1));
  console.log('\nwrote reports/compare-gpu.md, reports/compare-gpu.json');
  return all;
}
