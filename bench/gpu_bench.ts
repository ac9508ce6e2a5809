/**
 * The gpu engine on a real GPU: `npm run bench:gpu` (or the bundled file on the device machine).
 * Measures, in one process: Dawn's floor (one tiny dispatch + wait), the GPU's streaming read rate (a
 * WGSL read kernel), then the grouped matmul (Proposal #1, device offsets) on MoE-B shapes (E = 64,
 * top-6, K = 2048, N = 2816, f32) at decode and prefill token counts, wait included, and the
 * host-read-back baseline (map the offsets to the host first, then launch the same GEMM). Medians.
 * Each row also times the previous kernel choice (`gemm-tiled` only: gpuKernelTuning off), interleaved
 * with the current one in the same loop, and prints the ratio. Then weight-only int4 (u4, K-block 32
 * f32 scales) and int8 (s8, per expert column f32 scales) rows at decode / prefill token counts, each
 * beside its bound: floor + 2x the time to read the touched weight bytes (scales included) once.
 * --spin-ms=1500: the GPU is kept busy this long before each row (sustained clocks, gpu_clock_warmup.ts).
 * Prints a table and writes JSON to $OUT/gpu_bench.json when OUT is set.
 */
import { writeFileSync } from 'node:fs';
import { readRate, routedSizes, tinyDispatch } from './gpu_bench_common.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag, type DataType, type GpuEngine, type GpuMemory } from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const E = Number(arg('experts', '64')), TOPK = 6, K = Number(arg('k', '2048')), N = Number(arg('n', '2816'));
const TOKENS = arg('tokens', '1,4,8,256,4096').split(',').map(Number);
const REPS = Number(arg('reps', '10'));
// Sustained GPU work before each row is timed (gpu_clock_warmup.ts: clocks drop when the GPU idles).
const SPIN_MS = Number(arg('spin-ms', '1500'));
const QTOKENS = arg('qtokens', '1,4,8,256').split(',').filter((s) => s).map(Number);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// 20 warm-up runs, as gpu_moe_bench's: the first executions of a process run unoptimized JavaScript, and
// the first row (T = 1) is host-bound (session 10 read 0.33 ms there, bench/gpu_decode_probe.ts 0.17 ms).
async function timed(fn: () => Promise<void>, reps = REPS, warmup = 20): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    t.push(performance.now() - t0);
  }
  return median(t);
}

/** Medians of two functions timed alternately (A, B, A, B, ...) after their warm-ups. */
async function timedPair(a: () => Promise<void>, b: () => Promise<void>, reps = REPS, warmup = 20): Promise<[number, number]> {
  for (let i = 0; i < warmup; i++) { await a(); await b(); }
  const ta: number[] = [], tb: number[] = [];
  for (let i = 0; i < reps; i++) {
    let t0 = performance.now();
    await a();
    ta.push(performance.now() - t0);
    t0 = performance.now();
    await b();
    tb.push(performance.now() - t0);
  }
  return [median(ta), median(tb)];
}

/** A primitive built with the previous kernel choice (gemm-tiled for every shape). */
function withOldKernels<T>(make: () => T): T {
  const saved = { ...gpuKernelTuning };
  Object.assign(gpuKernelTuning, { gemv: false, vec4: false });
  try {
    return make();
  } finally {
    Object.assign(gpuKernelTuning, saved);
  }
}

async function floor(eng: GpuEngine): Promise<number> {
  const once = tinyDispatch(eng);
  return timed(async () => { await once(); }, 50, 5);
}

/** Fills a device buffer with small values in 64 MiB chunks (the values do not matter for speed; finite ones do). */
function fill(m: GpuMemory, bytes: number): void {
  const chunk = new Float32Array(Math.min(bytes, 64 << 20) / 4);
  for (let i = 0; i < chunk.length; i++) chunk[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
  const b = new Uint8Array(chunk.buffer);
  for (let off = 0; off < bytes; off += b.length) m.writeBytes(b.subarray(0, Math.min(b.length, bytes - off)), 0, off);
}

/** The weight-only rows: int4 with K-block 32 scales (AWQ / GPTQ-like), int8 with per expert column scales. */
const QUANT: readonly { name: string; wei: DataType; mask: number; groups: number[] }[] = [
  { name: 'u4 (K-block 32 f32 scales)', wei: 'u4', mask: 7, groups: [1, 32, 1] },
  { name: 's8 (per column f32 scales)', wei: 's8', mask: 5, groups: [] },
];

async function main(): Promise<void> {
  const eng = await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' });
  const info = { adapter: eng.adapterInfo, caps: eng.caps, node: process.version };
  console.log(JSON.stringify(info));
  const floorMs = await floor(eng);
  const bw = await readRate(eng, Number(arg('read-mib', '1024')) << 20, REPS);
  console.log(`floor (1 dispatch + wait): ${(floorMs * 1000).toFixed(1)} us; read kernel: ${bw.gbs.toFixed(0)} GB/s (${arg("read-mib", "1024")} MiB in ${bw.ms.toFixed(3)} ms)`);
  const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
  const wei = Memory.create(weiMd, eng);
  fill(wei, E * K * N * 4);
  const strm = new Stream(eng);
  const rows: Record<string, unknown>[] = [];
  for (const T of TOKENS) {
    const sizes = routedSizes(T, E, TOPK), M = T * TOPK;
    const srcMd = memory.desc.grouped([M, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([M, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
    const mm = new matmul.Primitive(pd);
    const pdOld = withOldKernels(() => new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
    const mmOld = withOldKernels(() => new matmul.Primitive(pdOld));
    // implInfo is derived when read: read it under the same choice.
    const oldImpl = withOldKernels(() => pdOld.implInfo);
    const src = Memory.create(srcMd, eng);
    fill(src, M * K * 4);
    src.writeOffsets(offsets.fromSizes(sizes));
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const args = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    await keepGpuBusy(eng, SPIN_MS);
    const [p1, old] = await timedPair(async () => {
      mm.execute(strm, args);
      await strm.wait();
    }, async () => {
      mmOld.execute(strm, args);
      await strm.wait();
    });
    // Host-read-back baseline: the sizes go to the host (as a per-expert launch loop needs them), then the GEMM.
    const rb = await timed(async () => {
      const o = await src.readOffsets();
      if (o[E] !== M) throw new Error('read-back offsets differ');
      mm.execute(strm, args);
      await strm.wait();
    });
    const touched = sizes.filter((s) => s > 0).length;
    const wBytes = touched * K * N * 4;
    const flops = 2 * M * K * N;
    const row = { T, rows: M, touchedExperts: touched, impl: pd.implInfo, p1Ms: p1, oldImpl, oldMs: old, oldOverNew: old / p1, readBackMs: rb, readBackOverP1: rb / p1, tflops: flops / p1 / 1e9, weightGBs: wBytes / p1 / 1e6, floorPlus2xRead: floorMs + 2 * (wBytes / (bw.gbs * 1e6)) };
    rows.push(row);
    console.log(`T=${T} rows=${M} experts=${touched} ${pd.implInfo}: P#1 ${p1.toFixed(3)} ms (${row.tflops.toFixed(2)} TFLOP/s, weights ${row.weightGBs.toFixed(0)} GB/s); host read-back + GEMM ${rb.toFixed(3)} ms (x${row.readBackOverP1.toFixed(2)}); floor + 2x read of touched weights = ${row.floorPlus2xRead.toFixed(3)} ms; previous ${oldImpl} ${old.toFixed(3)} ms (x${row.oldOverNew.toFixed(2)} slower)`);
    src.free();
    dst.free();
    mm.destroy();
    mmOld.destroy();
  }
  wei.free();
  const qrows: Record<string, unknown>[] = [];
  for (const q of QUANT) {
    const wq = Memory.create(memory.desc([E, K, N], q.wei, tag.abc), eng);
    fill(wq, wq.desc.getSize());
    const attr = new PrimitiveAttr().setScales(ARG.WEIGHTS, q.mask, q.groups, dt.f32);
    let sc: GpuMemory | undefined;
    for (const T of QTOKENS) {
      const sizes = routedSizes(T, E, TOPK), M = T * TOPK;
      const srcMd = memory.desc.grouped([M, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
      const dstMd = memory.desc.grouped([M, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, wq.desc, dstMd, attr);
      const pdOld = withOldKernels(() => new matmul.PrimitiveDesc(eng, srcMd, wq.desc, dstMd, attr));
      const mm = new matmul.Primitive(pd), mmOld = withOldKernels(() => new matmul.Primitive(pdOld));
      const oldImpl = withOldKernels(() => pdOld.implInfo);
      if (!sc) { sc = Memory.create(pd.queryMd('scales:weights')!, eng); fill(sc, sc.desc.getSize()); }
      const src = Memory.create(srcMd, eng);
      fill(src, M * K * 4);
      src.writeOffsets(offsets.fromSizes(sizes));
      const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      const args = { [ARG.SRC]: src, [ARG.WEIGHTS]: wq, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc };
      await keepGpuBusy(eng, SPIN_MS);
      const [ms, old] = await timedPair(async () => { mm.execute(strm, args); await strm.wait(); }, async () => { mmOld.execute(strm, args); await strm.wait(); });
      const touched = sizes.filter((s) => s > 0).length;
      const bytes = touched * (wq.desc.getSize() + sc.desc.getSize()) / E;
      const bound = floorMs + 2 * (bytes / (bw.gbs * 1e6));
      const row = { weights: q.name, T, rows: M, touchedExperts: touched, impl: pd.implInfo, ms, touchedBytes: bytes, weightGBs: bytes / ms / 1e6, floorPlus2xRead: bound, withinBound: ms <= bound, oldImpl, oldMs: old };
      qrows.push(row);
      console.log(`${q.name} T=${T} rows=${M} experts=${touched} ${pd.implInfo}: ${ms.toFixed(3)} ms (touched ${(bytes / 1e6).toFixed(1)} MB, ${row.weightGBs.toFixed(0)} GB/s); floor + 2x read of touched bytes = ${bound.toFixed(3)} ms (${row.withinBound ? 'within' : 'ABOVE'}); previous ${oldImpl} ${old.toFixed(3)} ms (x${(old / ms).toFixed(2)} slower)`);
      src.free();
      dst.free();
      mm.destroy();
      mmOld.destroy();
    }
    wq.free();
    sc?.free();
  }
  const out = process.env.OUT;
  if (out) writeFileSync(`${out}/gpu_bench.json`, JSON.stringify({ ...info, floorMs, readGBs: bw.gbs, rows, quantRows: qrows }, null, 2));
  eng.release();
}

await main();
