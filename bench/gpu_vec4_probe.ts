/**
 * Benchmark-only: `gemm-tiled-vec4` variants (vec4Tuning: K slice, double-buffered slices, rows per
 * thread of small tiles) on the P#1 f32 grouped GEMM of MoE-B shapes (E = 64, top-6, K = 2048,
 * N = 2816), interleaved round by round in one process, GPU time of the GEMM pass from timestamp
 * queries (the engine's pass profiler), median of --reps rounds.
 *   node gpu_vec4_probe.mjs --tokens=256,4096 --reps=10
 */
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag, type GpuEngine, type GpuMemory } from '../src/index.js';
import { vec4ShapeTag, vec4Tuning, type Vec4Variant } from '../src/kernels/wgsl/gemm_tiled_vec4.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';
import { routedSizes } from './gpu_bench_common.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const TOKENS = arg('tokens', '256,4096').split(',').map(Number);
const REPS = Number(arg('reps', '10'));
const E = 64, TOPK = 6, K = Number(arg('k', '2048')), N = Number(arg('n', '2816'));
// bk:db:rows[:unroll[:prefetch[:bigTile[:aRowsFast[:skipRows[:hoistA[:hoistB]]]]]]] (unroll, aRowsFast, skipRows
// default 0, prefetch 1; bigTile 0 or absent: vec4Tile's choice; hoistA / hoistB absent: the tile's default),
// 'default' (each tile's VEC4_DEFAULTS; 'default+sr' / 'default-sr': with skipRows on / off), or 'tiled'
// (gemm-tiled: vec4 off).
type ProbeVariant = { -readonly [F in keyof Vec4Variant]: Vec4Variant[F] | undefined } & { bigTile: number | undefined; tiled: boolean };
const VARIANTS: ProbeVariant[] = arg('variants', 'default,8:0:8,16:0:8:1,8:0:8:1:1:128:1').split(',').map((s) => {
  const none = { bk: undefined, doubleBuffer: undefined, smallRowsPerThread: undefined, unroll: undefined, prefetch: undefined, bigTile: undefined, aRowsFast: undefined, skipRows: undefined, hoistA: undefined, hoistB: undefined, tiled: false };
  if (s.startsWith('default')) return { ...none, skipRows: s === 'default+sr' ? true : s === 'default-sr' ? false : undefined };
  if (s === 'tiled') return { ...none, tiled: true };
  const f = s.split(':').map(Number);
  const flag = (i: number): boolean | undefined => (f[i] === undefined ? undefined : f[i] === 1);
  return { ...none, bk: f[0], doubleBuffer: f[1] === 1, smallRowsPerThread: f[2], unroll: f[3] === 1, prefetch: (f[4] ?? 1) === 1, bigTile: f[5] || undefined, aRowsFast: f[6] === 1, skipRows: f[7] === 1, hoistA: flag(8), hoistB: flag(9) };
});
// --wg-bytes=N: the workgroup memory the variants may use (default: the engine's maxComputeWorkgroupStorageSize).
const WG_BYTES = Number(arg('wg-bytes', '0'));
const ALLOCS = Number(arg('allocs', '1'));
const FREE = arg('free', '0') === '1';
const SHARED_IO = arg('shared-io', '0') === '1';
// --spin-ms=N: keep the GPU busy N ms before timing (sustained clocks, gpu_clock_warmup.ts).
const SPIN_MS = Number(arg('spin-ms', '1500'));
// blocked: emulate an N-blocked weights layout (each 128-column slab of an expert contiguous) as a GEMM
// over E * N / 128 groups of 128 columns each, every group taking its expert's rows: same FLOPs, same
// tile count, the weight access pattern of [E][N / 128][K][128].
const BLOCKED = arg('layout', 'plain') === 'blocked';

function fill(m: GpuMemory, bytes: number): void {
  const chunk = new Float32Array(Math.min(bytes, 64 << 20) / 4);
  for (let i = 0; i < chunk.length; i++) chunk[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
  const b = new Uint8Array(chunk.buffer);
  for (let off = 0; off < bytes; off += b.length) m.writeBytes(b.subarray(0, Math.min(b.length, bytes - off)), 0, off);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function main(): Promise<void> {
  const eng = (await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' })) as GpuEngine;
  console.log(JSON.stringify({ adapter: eng.adapterInfo, node: process.version, caps: eng.caps, invocations: eng.device.limits.maxComputeInvocationsPerWorkgroup }));
  vec4Tuning.wgBytes = WG_BYTES || eng.caps.maxComputeWorkgroupStorageSize;
  eng.setProfiling(true);
  const NB = BLOCKED ? Math.ceil(N / 128) : 1, G = E * NB, NG = BLOCKED ? 128 : N;
  const weiMd = memory.desc([G, K, NG], dt.f32, tag.abc);
  const strm = new Stream(eng);
  const ioByT = new Map<number, { src: GpuMemory; dst: GpuMemory }>();
  // Fresh weight allocations, one after another (the speed of a large buffer may depend on how it was placed).
  for (let alloc = 0; alloc < ALLOCS; alloc++) {
  const wei = Memory.create(weiMd, eng) as GpuMemory;
  fill(wei, G * K * NG * 4);
  const owned: { free(): void }[] = [wei];
  for (const T of TOKENS) {
    const sizes = routedSizes(T, E, TOPK).flatMap((m) => new Array<number>(NB).fill(m)), M = T * TOPK * NB;
    const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([M, NG], dt.f32, G, [RUNTIME_DIM_VAL, NG]);
    // --shared-io=1: src / dst allocated once per T (before the first weights), reused by every weights allocation.
    let io = SHARED_IO ? ioByT.get(T) : undefined;
    if (!io) {
      const s0 = Memory.create(srcMd, eng) as GpuMemory;
      fill(s0, M * K * 4);
      s0.writeOffsets(offsets.fromSizes(sizes));
      io = { src: s0, dst: Memory.create(dstMd, eng, [undefined, s0.handles[1]]) as GpuMemory };
      if (SHARED_IO) ioByT.set(T, io); else owned.push(io.src, io.dst);
    }
    const { src, dst } = io;
    const args = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    const saved = { ...vec4Tuning };
    const prims = VARIANTS.map((v) => {
      Object.assign(vec4Tuning, { bk: v.bk, doubleBuffer: v.doubleBuffer, smallRowsPerThread: v.smallRowsPerThread, unroll: v.unroll, prefetch: v.prefetch, bigTile: v.bigTile, aRowsFast: v.aRowsFast, skipRows: v.skipRows, hoistA: v.hoistA, hoistB: v.hoistB });
      gpuKernelTuning.vec4 = !v.tiled;
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
      const prim = new matmul.Primitive(pd);
      const info = pd.implInfo;
      const tm = /vec4-(\d+)x/.exec(info)?.[1];
      const key = tm ? vec4ShapeTag(Number(tm)) : '';
      Object.assign(vec4Tuning, saved);
      gpuKernelTuning.vec4 = true;
      return { v, prim, info, key, gpu: [] as number[], wall: [] as number[], bits: undefined as Uint8Array | undefined };
    });
    console.log(`[${new Date().toISOString()}] alloc ${alloc} T=${T}: timing`);
    await keepGpuBusy(eng, SPIN_MS);
    for (let round = -3; round < REPS; round++) {
      for (const x of prims) {
        const t0 = performance.now();
        x.prim.execute(strm, args);
        await strm.wait();
        const wall = performance.now() - t0;
        const prof = eng.takeProfile();
        if (round === REPS - 1 && x === prims[0]) console.log(`  passes: ${prof.map((q) => `${q.label} ${(q.ms * 1000).toFixed(0)} us`).join(', ')}`);
        const gemm = prof.filter((q) => q.label.includes('matmul')).reduce((s, q) => s + q.ms, 0);
        if (round >= 0) { x.gpu.push(gemm); x.wall.push(wall); }
        if (round === 0) x.bits = new Uint8Array(await dst.read());
      }
    }
    const flops = 2 * M * K * NG;
    const ref = prims[0].bits!;
    for (const x of prims) {
      const g = median(x.gpu);
      let same = x.bits!.length === ref.length;
      // Different K slices keep one fma chain over k ascending: the same bits as the first variant.
      for (let i = 0; same && i < ref.length; i++) same = x.bits![i] === ref[i];
      console.log(`${BLOCKED ? 'blocked' : 'plain'} alloc ${alloc} T=${T} rows=${M} ${x.v.tiled ? 'tiled' : x.key} ${x.info}: GPU ${g.toFixed(3)} ms (${(flops / g / 1e9).toFixed(1)} TFLOP/s), wall ${median(x.wall).toFixed(3)} ms, bits ${same ? 'same' : 'DIFFER'}`);
    }
  }
  if (FREE) {
    for (const m of owned) m.free();
    await strm.wait();
  }
  }
  process.exit(0);
}
await main();
