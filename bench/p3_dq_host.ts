/**
 * Per-step cost of Proposal #3 beside Proposal #1 at decode, f32 and `:dq` (s4 weights), the compare's
 * user code (bench/compare_dq.ts, examples/p1-grouped-memory.ts, p3-pointer-array.ts): step + wait, process
 * CPU time (one thread: the work runs in the calling thread), the rows run round-robin, medians in ms.
 *   npx tsx bench/p3_dq_host.ts [--workload=decode-e256|decode-e64] [--steps=200] [--rows=p1,p3,p1dq,p3dq]
 * `--rows=p3dq` alone, under `node --cpu-prof --import tsx`, profiles the P#3 `:dq` step. `--host-only`: every
 * wasm job returns at once after setup (outputs not computed), so a step times the host side alone.
 * `--execute-only`: the wall time of the primitives' execute calls alone (argument checks, the executor's host
 * side, enqueue), in us, without the user code around them.
 */
import { Engine, Memory, Stream, dt, grouped_gemm, matmul, memory, tag } from '../src/index.js';
import { createP1 } from '../examples/p1-grouped-memory.js';
import { createP3 } from '../examples/p3-pointer-array.js';
import type { MoeShape, ProposalRunner } from '../examples/proposals_harness.js';
import { createP1Dq, createP3Dq } from './compare_dq.js';
import { fillRandom } from './timing.js';
import { routeZipf } from './workloads.js';

const opt = (k: string, d: string): string => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const SHAPES: Readonly<Record<string, { tokens: number; topk: number; E: number; K: number; N: number }>> = {
  'decode-e256': { tokens: 4, topk: 8, E: 256, K: 512, N: 512 },
  'decode-e64': { tokens: 8, topk: 6, E: 64, K: 1024, N: 1408 },
};
const wl = opt('workload', 'decode-e256');
const w = SHAPES[wl];
if (!w) throw new Error(`--workload: one of ${Object.keys(SHAPES).join(', ')}`);
const steps = Number(opt('steps', '200'));
const rows = opt('rows', 'p1,p3,p1dq,p3dq').split(',');

const eng = await Engine.create({ threads: 1 });
eng.scratch(1 << 20);
const strm = new Stream(eng);
const shape: MoeShape = { E: w.E, K: w.K, N: w.N, capacity: w.tokens * w.topk };
const f32w = Memory.create(memory.desc([w.E, w.K, w.N], dt.f32, tag.abc), eng);
fillRandom(f32w.values as Float32Array, 9, 0.05);
const codes = new Float32Array(w.E * w.K * w.N);
fillRandom(codes, 9, 14);
const s4w = Memory.create(memory.desc([w.E, w.K, w.N], dt.s4, tag.abc), eng).write(codes.map(Math.round));
const scales = new Float32Array(w.E * w.N);
fillRandom(scales, 6, 1e-3);
scales.forEach((v, i) => (scales[i] = 16 * (2e-4 + Math.abs(v))));
const make: Readonly<Record<string, () => ProposalRunner>> = {
  p1: () => createP1(eng, strm, shape, f32w),
  p3: () => createP3(eng, strm, shape, f32w),
  p1dq: () => createP1Dq(eng, strm, shape, s4w, scales),
  p3dq: () => createP3Dq(eng, strm, shape, s4w, scales),
};
const runs = rows.map((r) => {
  if (!make[r]) throw new Error(`--rows: ${Object.keys(make).join(', ')}`);
  return { name: r, run: make[r](), ms: [] as number[] };
});
await strm.wait();
if (process.argv.includes('--host-only')) {
  // (bench only: the engine's kernels, run_job skipped)
  const k = eng.kernels;
  if (!k) throw new Error('--host-only: no kernels in the calling thread');
  Object.defineProperty(eng, 'kernels', { value: { ...k, run_job: (): number => 0 } });
}
const executeOnly = process.argv.includes('--execute-only');
let inExecute = 0;
if (executeOnly) {
  // (bench only: the execute methods timed in place)
  for (const proto of [matmul.Primitive.prototype, grouped_gemm.Primitive.prototype] as { execute(...a: unknown[]): void }[]) {
    const execute = proto.execute;
    proto.execute = function (this: unknown, ...a: unknown[]): void {
      const t = performance.now();
      execute.apply(this, a);
      inExecute += performance.now() - t;
    };
  }
}
const tokens = new Float32Array(shape.capacity * w.K);
fillRandom(tokens, 17);
const cpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
for (let s = 0; s < steps + 5; s++) {
  const routing = routeZipf(w.tokens, w.E, w.topk, 0.6, 1000 + s);
  for (const r of runs) {
    r.run.srcValues.set(tokens);
    const t = cpu();
    inExecute = 0;
    r.run.step(routing);
    await strm.wait();
    if (s >= 5) r.ms.push(executeOnly ? inExecute * 1000 : cpu() - t);
  }
}
const median = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1];
const what = executeOnly ? 'execute calls alone, wall us per step' : 'process CPU ms per step';
console.log(`${wl}, ${steps} steps${process.argv.includes('--host-only') ? ', host only' : ''}, ${what} (median): ${runs.map((r) => `${r.name} ${median(r.ms).toFixed(executeOnly ? 1 : 3)}`).join('  ')}`);
eng.release();
