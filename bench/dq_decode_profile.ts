/**
 * Where the time of a `:dq` decode step goes (issue 19): runs the given `--mode=weights` variants on the decode
 * workload (1 thread: the kernels run on this thread), interleaved, and prints the process CPU time per step
 * of each; with --profile=DIR it writes a V8 CPU profile of the timed loop only (no preparation), to read with
 * a wasm build that keeps its name section (wasm/build.sh leaves it out).
 *   npx tsx bench/dq_decode_profile.ts --variants=f32,w4:dq --steps=200 [--relaxed-dot] [--profile=/tmp/p]
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { Engine, Stream } from '../src/index.js';
import { WORKLOADS } from './workloads.js';
import { VARIANTS, prepare, type Prepared, type WeightsCache } from './quant_bench.js';

const args = new Map(process.argv.slice(2).map((a) => { const m = /^--([^=]+)(?:=(.*))?$/.exec(a); return [m?.[1] ?? a, m?.[2] ?? 'true'] as const; }));
const names = (args.get('variants') ?? 'f32,w4:dq').split(',');
const steps = Number(args.get('steps') ?? 100);
const w = WORKLOADS[args.get('workload') ?? 'decode'];
const eng = await Engine.create({ threads: 1, relaxedDot: args.has('relaxed-dot') });
const strm = new Stream(eng);
const cache: WeightsCache = new Map();
const preps: Prepared[] = names.map((n) => {
  const v = VARIANTS.find((x) => x.name === n);
  if (!v) throw new Error(`unknown variant ${n}`);
  const p = prepare(eng, strm, w, v, 'packed', cache);
  return p;
});
await strm.wait();
preps.forEach((p) => p.dropTemps());
const cpu = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
for (const p of preps) await p.run();
const session = args.has('profile') ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
}
const t: number[][] = preps.map(() => []);
for (let s = 0; s < steps; s++) preps.forEach((p, i) => { const c0 = cpu(); void p.run(); t[i].push(cpu() - c0); });
if (session) {
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(`${args.get('profile')}/dq.cpuprofile`, JSON.stringify(profile));
}
const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1];
names.forEach((n, i) => console.log(n.padEnd(12), preps[i].impl.padEnd(40), med(t[i]).toFixed(3), 'ms/step (median cpu)', (med(t[0]) / med(t[i])).toFixed(2), 'x', names[0]));
eng.release();
