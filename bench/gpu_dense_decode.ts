/**
 * Dense matmul of few rows on the gpu engine (a shared expert or a router at decode, the host-read-back
 * baseline's per-expert GEMMs): `gemv-splitk`'s dense form against `gemm-tiled` (the decode kernel
 * off), same shapes, executions interleaved in one process after the GPU was kept busy (sustained
 * clocks, gpu_clock_warmup.ts), in a rotating order; the gemv also with 2 K splits (and their reduce pass). Per row: the
 * wall (execute + wait) median, the host time of execute (recording), the GPU time of the passes
 * (timestamp queries), and issue 20's bound: Dawn's one-dispatch floor (a raw dispatch + wait) + 2x
 * the time to read the weights once at the WGSL read kernel's rate over 1 GiB (both measured here).
 *
 *   npx tsx bench/gpu_dense_decode.ts --tokens=1,4,8 --shape=2048,2816 --types=f32,u4,s8 --reps=30
 */
import { ARG, Engine, Memory, PrimitiveAttr, Stream, dt, matmul, memory, tag, type DataType, type GpuEngine, type GpuMemory } from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { fillDeterministic, readRate, tinyDispatch } from './gpu_bench_common.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Weight bytes of a [K, N] matrix of `t` with its scales (u4: K-blocks of 32, s8: per column, f32 scales). */
function weightBytes(t: DataType, K: number, N: number): number {
  if (t === 'u4') return (K * N) / 2 + (K / 32) * N * 4;
  if (t === 's8') return K * N + N * 4;
  return K * N * 4;
}

interface Built { readonly prim: matmul.Primitive; readonly args: Record<number, GpuMemory>; readonly info: string }

/** A kernel choice: gemv-splitk (one pass, the default), gemv-splitk with 2 K splits (and its reduce pass), gemm-tiled. */
type Kernel = 'gemv' | 'gemv-kg2' | 'tiled';
const DEFAULT_DENSE_MAX_ROWS = gpuKernelTuning.gemvDenseMaxRows;

function build(eng: GpuEngine, M: number, K: number, N: number, t: DataType, kernel: Kernel): Built {
  gpuKernelTuning.gemv = kernel !== 'tiled';
  // Any T here takes the gemv (tiles of 8 rows past 8), to find where gemm-tiled overtakes it.
  gpuKernelTuning.gemvDenseMaxRows = 1024;
  gpuKernelTuning.gemvDenseMaxKSplit = kernel === 'gemv-kg2' ? 16 : 1;
  gpuKernelTuning.gemvKSplit = kernel === 'gemv-kg2' ? 2 : undefined;
  try {
    const attr = new PrimitiveAttr();
    if (t === 'u4') attr.setScales(ARG.WEIGHTS, (1 << 0) | (1 << 1), [32, 1], dt.f32);
    if (t === 's8') attr.setScales(ARG.WEIGHTS, 1 << 1, [], dt.f32);
    const mds = [memory.desc([M, K], dt.f32, tag.ab), memory.desc([K, N], t, tag.ab), memory.desc([M, N], dt.f32, tag.ab)] as const;
    const pd = new matmul.PrimitiveDesc(eng, ...mds, attr);
    const args: Record<number, GpuMemory> = { [ARG.SRC]: Memory.create(mds[0], eng), [ARG.WEIGHTS]: Memory.create(mds[1], eng), [ARG.DST]: Memory.create(mds[2], eng) };
    fillDeterministic(args[ARG.SRC], dt.f32, 1, 1);
    fillDeterministic(args[ARG.WEIGHTS], t, 0.05, 2);
    const sc = pd.queryMd('scales:weights');
    if (sc) {
      args[ARG.ATTR_SCALES | ARG.WEIGHTS] = Memory.create(sc, eng);
      fillDeterministic(args[ARG.ATTR_SCALES | ARG.WEIGHTS], dt.f32, 0.01, 3);
    }
    return { prim: new matmul.Primitive(pd), args, info: pd.implInfo };
  } finally {
    gpuKernelTuning.gemv = true;
    gpuKernelTuning.gemvKSplit = undefined;
    gpuKernelTuning.gemvDenseMaxKSplit = 1;
    gpuKernelTuning.gemvDenseMaxRows = DEFAULT_DENSE_MAX_ROWS;
  }
}

async function main(): Promise<void> {
  const tokens = arg('tokens', '1,4,8').split(',').map(Number);
  const [K, N] = arg('shape', '2048,2816').split(',').map(Number);
  const types = arg('types', 'f32,u4,s8').split(',') as DataType[];
  const reps = Number(arg('reps', '30'));
  const eng = await Engine.create({ kind: 'gpu' });
  const strm = new Stream(eng);
  console.log(`dense decode GEMMs [T, ${K}] x [${K}, ${N}] on ${eng.adapterInfo}, node ${process.version}; medians of ${reps}, interleaved`);
  try {
    // The read rate over 1 GiB (a smaller read is dominated by the submit and the wait).
    const rate = await readRate(eng, Number(arg('read-mb', '1024')) << 20);
    const tiny = tinyDispatch(eng);
    for (const t of types) {
      for (const T of tokens) {
        const rows = (['gemv', 'gemv-kg2', 'tiled'] as const).map((k) => build(eng, T, K, N, t, k));
        const wall: number[][] = rows.map(() => []), host: number[][] = rows.map(() => []), gpu: number[][] = rows.map(() => []), floor: number[] = [];
        await keepGpuBusy(eng, Number(arg('spin-ms', '1500')));
        for (let r = 0; r < reps + 3; r++) {
          const f0 = performance.now();
          await tiny();
          if (r >= 3) floor.push(performance.now() - f0);
          // The rows in a rotating order: the first execution after the floor's wait measured up to 80 us slower.
          for (let j = 0; j < rows.length; j++) {
            const i = (j + r) % rows.length;
            eng.setProfiling(r % 2 === 1);
            const t0 = performance.now();
            rows[i].prim.execute(strm, rows[i].args);
            const t1 = performance.now();
            await strm.wait();
            const ms = performance.now() - t0;
            if (r >= 3 && r % 2 === 0) host[i].push(t1 - t0);
            const prof = eng.takeProfile();
            eng.setProfiling(false);
            if (r < 3) continue;
            // Odd reps time the passes (the queries add a little), even ones the wall.
            if (prof.length) gpu[i].push(prof.reduce((s, p) => s + p.ms, 0));
            else wall[i].push(ms);
          }
        }
        const bytes = weightBytes(t, K, N);
        const bound = median(floor) + (2 * bytes) / (rate.gbs * 1e6);
        const cells = rows.map((b, i) => `${b.info} wall ${median(wall[i]).toFixed(3)} ms (execute ${(median(host[i]) * 1000).toFixed(0)} us, GPU ${(median(gpu[i]) * 1000).toFixed(1)} us)`);
        console.log(`${t} T=${T}: bound ${bound.toFixed(3)} ms (floor ${median(floor).toFixed(3)} + 2 x ${(bytes / 1e6).toFixed(2)} MB at ${rate.gbs.toFixed(0)} GB/s) | ${cells.join(' | ')} | tiled / gemv wall ${(median(wall[2]) / median(wall[0])).toFixed(2)}x`);
        for (const b of rows) { b.prim.destroy(); Object.values(b.args).forEach((m) => m.free()); }
      }
    }
  } finally {
    eng.release();
  }
}

await main();
