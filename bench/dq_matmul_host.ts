/**
 * Host cost of one matmul `:dq` execution at decode (P#1 grouped src, s4 weights, per-column scales): execute +
 * wait, one thread (the job runs in the calling thread), median and p10 in µs over the steps, after warm-up.
 *   npx tsx bench/dq_matmul_host.ts [--E=64] [--rows=8] [--K=512] [--N=512] [--steps=2000] [--host-only]
 * `--host-only`: every wasm job returns at once after setup (outputs not computed): the host side alone.
 * Between executions it reads properties of the caller's memories (as a layer's user code does), so a
 * slower shape of those objects (e.g. turned into prototypes) shows in the step.
 */
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, matmul, memory, reorder, tag } from '../src/index.js';
import { fillRandom } from './timing.js';

const opt = (k: string, d: string): number => Number(process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d);
const E = opt('E', '64'), T = opt('rows', '8'), K = opt('K', '512'), N = opt('N', '512'), steps = opt('steps', '2000');

const eng = await Engine.create({ threads: 1 });
eng.scratch(1 << 20);
const strm = new Stream(eng);
const srcMd = memory.desc.grouped([T, K], dt.f32, E, [RT, K]);
const dstMd = memory.desc.grouped([T, N], dt.f32, E, [RT, N]);
const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], dt.s4, tag.any), dstMd, new PrimitiveAttr().setDynamicQuantization(ARG.SRC).setScales(ARG.WEIGHTS, 5));
const codes = new Float32Array(E * K * N);
fillRandom(codes, 9, 7);
const user = Memory.create(memory.desc([E, K, N], dt.s4, tag.abc), eng).write(codes.map(Math.round));
const scales = Memory.create(pd.queryMd('scales:weights')!, eng).write(new Float32Array(E * N).fill(1e-3));
const wei = Memory.create(pd.queryMd('weights')!, eng);
new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, wei.desc)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales });
const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
fillRandom(src.values as Float32Array, 17);
// T rows over the first T experts, one each (decode: most experts empty)
src.offsets.set(Array.from({ length: E + 1 }, (_, g) => Math.min(g, T)));
const prim = new matmul.Primitive(pd);
const args = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
await strm.wait();
if (process.argv.includes('--host-only')) {
  // (bench only: the engine's kernels, run_job skipped)
  const k = eng.kernels;
  if (!k) throw new Error('--host-only: no kernels in the calling thread');
  Object.defineProperty(eng, 'kernels', { value: { ...k, run_job: (): number => 0 } });
}
const us: number[] = [];
let sink = 0;
for (let s = 0; s < steps + 200; s++) {
  const t = performance.now();
  prim.execute(strm, args);
  await strm.wait();
  // user code between steps: the caller's memories' properties
  for (const m of [src, dst, wei]) sink += m.handles[0] + m.desc.ndims;
  if (s >= 200) us.push((performance.now() - t) * 1000);
}
us.sort((a, b) => a - b);
console.log(`matmul :dq P#1 E=${E} rows=${T} K=${K} N=${N} s4, ${steps} steps${process.argv.includes('--host-only') ? ', host only' : ''}: median ${us[us.length >> 1].toFixed(1)} us, p10 ${us[Math.floor(us.length / 10)].toFixed(1)} us per execute (${sink > 0 ? 'ok' : ''})`);
eng.release();
