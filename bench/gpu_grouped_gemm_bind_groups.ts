/**
 * Host time of grouped_gemm.execute (encode + submit, not the GPU work) on the gpu engine with its
 * bind groups reused (the same memories again) vs rebuilt (alternating two sets of memories),
 * interleaved, medians. Tiny experts (K = N = 16, one row) so the GPU work does not dominate the run.
 *   npx tsx bench/gpu_grouped_gemm_bind_groups.ts [E]
 */
import { gpuEngine } from '../test/gpu_helpers.js';
import { ARG, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, memory, tag, type GpuMemory } from '../src/index.js';
const E = Number(process.argv[2] ?? 64), K = 16, N = 16;
const eng = await gpuEngine();
const strm = new Stream(eng);
const r = (c: number) => memory.desc([RUNTIME_DIM_VAL, c], dt.f32, tag.ab);
const dimsMd = memory.desc([E], dt.s32, tag.x);
const pd = new grouped_gemm.PrimitiveDesc(eng, Array(E).fill(r(K)), Array(E).fill(memory.desc([K, N], dt.f32, tag.ab)), Array(E).fill(r(N)), dimsMd);
const prim = new grouped_gemm.Primitive(pd);
const buf = (bytes: number) => eng.device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
const set = () => {
  const a: Record<number, GpuMemory> = { [ARG.RUNTIME_DIMS]: Memory.create(dimsMd, eng).write(Array(E).fill(1)) };
  for (let e = 0; e < E; e++) {
    a[ARG.MULTIPLE_SRC + e] = Memory.create(r(K), eng, buf(4 * K * 2));
    a[ARG.MULTIPLE_WEIGHTS + e] = Memory.create(memory.desc([K, N], dt.f32, tag.ab), eng);
    a[ARG.MULTIPLE_DST + e] = Memory.create(r(N), eng, buf(4 * N * 2));
  }
  return a;
};
const A = set(), B = set();
const hit: number[] = [], miss: number[] = [];
for (let i = 0; i < 41; i++) {
  for (const mode of ['hit', 'miss'] as const) {
    // miss: alternate A/B so the single-entry cache never matches; hit: A twice in a row.
    const first = mode === 'hit' ? A : B;
    prim.execute(strm, first); await strm.wait();
    const t0 = performance.now();
    prim.execute(strm, A);
    const t1 = performance.now();
    await strm.wait();
    if (i > 0) (mode === 'hit' ? hit : miss).push(t1 - t0);
  }
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`E=${E}: execute host ms, bind groups reused ${med(hit).toFixed(3)}, rebuilt ${med(miss).toFixed(3)} (medians of ${hit.length}, interleaved)`);
eng.release();
