/**
 * Host cost of one Proposal #3 `grouped_gemm` execute with many experts and no rows (every expert's
 * arguments checked, nothing computed): median of 2000 executes, microseconds.
 *   npx tsx bench/p3_host_cost.ts [--experts=256]
 */
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, memory, tag } from '../src/index.js';

const E = Number(process.argv.find((a) => a.startsWith('--experts='))?.slice(10) ?? 256);
const K = 8, N = 8;
const eng = await Engine.create({ threads: 1 });
const rowsMd = (c: number): ReturnType<typeof memory.desc> => memory.desc([RUNTIME_DIM_VAL, c], dt.f32, tag.ab);
const pd = new grouped_gemm.PrimitiveDesc(eng, Array.from({ length: E }, () => rowsMd(K)), Array.from({ length: E }, () => memory.desc([K, N], dt.f32, tag.ab)),
  Array.from({ length: E }, () => rowsMd(N)), memory.desc([E], dt.s32, tag.x));
const args: Record<number, Memory> = {};
for (let e = 0; e < E; e++) {
  args[ARG.MULTIPLE_SRC + e] = Memory.create(rowsMd(K), eng, undefined, { capacityBytes: 4 * K });
  args[ARG.MULTIPLE_DST + e] = Memory.create(rowsMd(N), eng, undefined, { capacityBytes: 4 * N });
  args[ARG.MULTIPLE_WEIGHTS + e] = Memory.create(memory.desc([K, N], dt.f32, tag.ab), eng);
}
args[ARG.RUNTIME_DIMS] = Memory.create(memory.desc([E], dt.s32, tag.x), eng).write(new Array<number>(E).fill(0));
const prim = new grouped_gemm.Primitive(pd);
const strm = new Stream(eng);
const ts: number[] = [];
for (let r = 0; r < 2000; r++) {
  const t = performance.now();
  prim.execute(strm, args);
  ts.push(performance.now() - t);
  await strm.wait();
}
ts.sort((a, b) => a - b);
console.log(`grouped_gemm execute host cost, E = ${E}, empty experts: median ${(ts[ts.length >> 1] * 1000).toFixed(1)} us`);
eng.release();
