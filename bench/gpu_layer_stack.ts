/**
 * A stack of MoE layers on the gpu engine, as a model's decode step runs them: L layers, each with its
 * own weights, layer i's output the next one's hidden input (the router logits fixed). Three ways of
 * waiting, timed interleaved in one process (medians of --reps, per layer):
 *  - `wait-each`: execute + wait per layer (what gpu_moe_bench times, L times);
 *  - `one-batch`: every layer recorded, then one wait (one submit: the GPU idles while the host records);
 *  - `submit-each`: `stream.submit()` after each layer, one wait at the end (the GPU runs layer i while the
 *    host records layer i + 1).
 *
 *   npx tsx bench/gpu_layer_stack.ts --workloads=decode-1,moe-b --variants=int4 --layers=8 --reps=20
 */
import { ARG, Engine, Stream, moe, type GpuEngine, type GpuMemory } from '../src/index.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';
import { layerMemories, layerPd, type GpuMoeVariant } from './gpu_bench_common.js';
import { gpuMoeWorkload } from './gpu_moe_bench.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];

type Mode = 'wait-each' | 'one-batch' | 'submit-each';
const MODES: readonly Mode[] = ['wait-each', 'one-batch', 'submit-each'];

async function stack(eng: GpuEngine, workload: string, v: GpuMoeVariant, L: number, reps: number): Promise<void> {
  const w = gpuMoeWorkload(workload);
  const strm = new Stream(eng);
  const pd = layerPd(eng, w, v);
  const layers: { prim: moe.layer.Primitive<GpuEngine>; args: Record<number, GpuMemory>; owned: GpuMemory[] }[] = [];
  for (let i = 0; i < L; i++) {
    const { args, owned } = layerMemories(eng, pd, w, v);
    layers.push({ prim: new moe.layer.Primitive(pd), args, owned });
  }
  // Layer i reads layer i - 1's output (layer 0 its own hidden input).
  for (let i = 1; i < L; i++) layers[i].args = { ...layers[i].args, [ARG.SRC]: layers[i - 1].args[ARG.DST] };
  const run = async (m: Mode): Promise<number> => {
    const t0 = performance.now();
    for (const l of layers) {
      l.prim.execute(strm, l.args);
      if (m === 'wait-each') await strm.wait();
      else if (m === 'submit-each') strm.submit();
    }
    await strm.wait();
    return performance.now() - t0;
  };
  await keepGpuBusy(eng, 1500);
  for (let i = 0; i < 10; i++) for (const m of MODES) await run(m);
  const t = MODES.map(() => [] as number[]);
  for (let r = 0; r < reps; r++) for (const [j, m] of MODES.entries()) t[j].push(await run(m));
  const per = t.map((x) => median(x) / L);
  console.log(`${workload} ${v}, ${L} layers, per layer (ms): ${MODES.map((m, j) => `${m} ${per[j].toFixed(3)}`).join(', ')}; submit-each / one-batch ${(per[2] / per[1]).toFixed(3)}`);
  for (const l of layers) {
    l.prim.destroy();
    for (const m of l.owned) m.free();
  }
}

const eng = await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' });
console.log(`gpu: ${eng.adapterInfo}; node ${process.version}`);
const L = Number(arg('layers', '8')), reps = Number(arg('reps', '20'));
for (const wl of arg('workloads', 'decode-1,decode-4,moe-b').split(',')) {
  for (const v of arg('variants', 'int4').split(',') as GpuMoeVariant[]) await stack(eng, wl, v, L, reps);
}
eng.release();
