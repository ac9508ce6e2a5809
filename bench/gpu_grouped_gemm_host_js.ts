/**
 * The library's own JavaScript in a gpu Proposal #3 `grouped_gemm` execution: E experts of one row each,
 * on a null WebGPU device (bench/null_gpu_device.ts: every WebGPU call returns at once), so `execute` +
 * `wait` time is the argument checks, the per-expert planning and the recording, not Dawn's calls.
 * Medians of `reps` executions of the same arguments (bind groups and plan reused).
 *
 *   npx tsx bench/gpu_grouped_gemm_host_js.ts --E=256 --reps=3000
 */
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, memory, tag, type GpuMemory } from '../src/index.js';
import { nullGpuDevice } from './null_gpu_device.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const E = Number(arg('E', '256')), K = Number(arg('K', '512')), N = Number(arg('N', '512')), reps = Number(arg('reps', '3000'));

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

const eng = await Engine.create({ kind: 'gpu', device: nullGpuDevice() });
const rt = (c: number) => memory.desc([RUNTIME_DIM_VAL, c], dt.f32, tag.ab);
const pd = new grouped_gemm.PrimitiveDesc(eng, Array.from({ length: E }, () => rt(K)), Array.from({ length: E }, () => memory.desc([K, N], dt.f32, tag.ab)),
  Array.from({ length: E }, () => rt(N)), memory.desc([E], dt.s32, tag.x));
const prim = new grouped_gemm.Primitive(pd);
const a: Record<number, GpuMemory> = { [ARG.RUNTIME_DIMS]: Memory.create(memory.desc([E], dt.s32, tag.x), eng) };
for (let e = 0; e < E; e++) {
  // Two rows of capacity per expert (decode).
  a[ARG.MULTIPLE_SRC + e] = Memory.create(rt(K), eng, Memory.create(memory.desc([2, K], dt.f32, tag.ab), eng).buffers[0]);
  a[ARG.MULTIPLE_WEIGHTS + e] = Memory.create(memory.desc([K, N], dt.f32, tag.ab), eng);
  a[ARG.MULTIPLE_DST + e] = Memory.create(rt(N), eng, Memory.create(memory.desc([2, N], dt.f32, tag.ab), eng).buffers[0]);
}
const strm = new Stream(eng);
const exec: number[] = [], wait: number[] = [];
for (let i = 0; i < reps; i++) {
  const t0 = performance.now();
  prim.execute(strm, a);
  const t1 = performance.now();
  await strm.wait();
  if (i >= 10) {
    exec.push(t1 - t0);
    wait.push(performance.now() - t1);
  }
}
console.log(`grouped_gemm E=${E} K=${K} N=${N}, null device, node ${process.version}: execute ${(median(exec) * 1000).toFixed(1)} us (${((median(exec) * 1000) / E).toFixed(2)} us per expert), wait ${(median(wait) * 1000).toFixed(1)} us; median of ${exec.length}`);
eng.release();
