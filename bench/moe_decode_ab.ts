/**
 * Issue 19: the MoE layer at decode shapes, f32 vs weight-only int8 / int4 (strict, accumulation_mode
 * relaxed, and dynamic int8 activations `:dq`), all layers timed in one process, interleaved round by round (the same interference for each):
 *   npx tsx bench/moe_decode_ab.ts --workload=decode-1,decode-4 --threads=1,2 --rounds=7 --min-ms=150
 * Per round each layer runs >= min-ms; its median execution is the round's figure. 1 thread: process CPU
 * time (the machine is shared); 2 threads: wall time. Prints per layer the median over rounds and the
 * median of the per-round ratios over the f32 layer.
 */
import { Engine } from '../src/index.js';
import { MOE_WORKLOADS } from './moe_workloads.js';
import { f32Layers } from './moe_bench.js';
import { LOWP_LAYER_MODES as MODES, lowpLayers, type RunnableLayer } from './moe_lowp_layer.js';

const args = new Map(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=') as [string, string]));
const workloads = (args.get('workload') ?? 'decode-1,decode-4').split(',');
const threadsList = (args.get('threads') ?? '1').split(',').map(Number);
const rounds = Number(args.get('rounds') ?? 7), minMs = Number(args.get('min-ms') ?? 150);
const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1];

for (const threads of threadsList) {
  const cpu = threads === 1;
  const now = (): number => {
    if (!cpu) return performance.now();
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  // f32 weights (2.2 GB at MoE-B shapes) on an engine of their own: one wasm memory holds at most 4 GB. The
  // decode workloads share E, K, I: one copy of each weight set serves all of them.
  const ef = await Engine.create({ threads }), eq = await Engine.create({ threads });
  const ws = workloads.map((n) => MOE_WORKLOADS[n]);
  console.error(`${threads}T: building the layers`);
  const f32 = await f32Layers(ws, ef);
  const q: RunnableLayer[][] = [];
  for (const bits of [8, 4] as const) q.push(await lowpLayers(eq, bits, ws.flatMap((w) => MODES.map((mode) => ({ w, mode })))));
  for (const [wi, w] of ws.entries()) {
    const layers: [string, RunnableLayer][] = [['f32', f32[wi]]];
    for (const [bi, bits] of [8, 4].entries())
      MODES.forEach((mode, mi) => layers.push([`w${bits}${mode === 'strict' ? '' : `:${mode}`}`, q[bi][MODES.length * wi + mi]]));
    console.error(`${w.name} ${threads}T: timing`);
    const per: number[][] = layers.map(() => []);
    for (const [, l] of layers) for (let i = 0; i < 3; i++) await l.run();
    for (let r = 0; r < rounds; r++)
      for (let i = 0; i < layers.length; i++) {
        const t: number[] = [];
        const start = performance.now();
        while (t.length < 5 || performance.now() - start < minMs) {
          const t0 = now();
          await layers[i][1].run();
          t.push(now() - t0);
        }
        per[i].push(med(t));
      }
    console.log(`${w.description}, ${threads} thread(s), ${cpu ? 'process CPU' : 'wall'} time, ${rounds} interleaved rounds, node ${process.version}, isa ${ef.isa}`);
    for (let i = 0; i < layers.length; i++) {
      const ratio = med(per[i].map((v, r) => per[0][r] / v));
      console.log(`  ${layers[i][0].padEnd(10)} ${med(per[i]).toFixed(2).padStart(8)} ms  x${ratio.toFixed(2)} vs f32 layer  ${layers[i][1].implInfo}`);
    }
  }
  for (const l of [...f32, ...q.flat()]) l.free();
  ef.release();
  eq.release();
}
