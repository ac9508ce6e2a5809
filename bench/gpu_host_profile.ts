/**
 * Where the host time of a gpu MoE layer execution goes (issue 21's decode latency): per stage, the
 * time `stage.execute` takes to record (JS + Dawn recording calls), the wait, and each Dawn method's
 * calls and host time per layer. Runs on any WebGPU (SwiftShader here: its Dawn calls cost more than on
 * a real GPU, the JS the same).
 *
 *   npx tsx bench/gpu_host_profile.ts --T=1 --E=64 --k=6 --K=2048 --I=1408 --variant=int4 --reps=200
 */
import { countDawnCalls } from './gpu_bench_common.js';
import { ARG, Engine, Memory, MemoryDesc, Stream, dt, memory, moe, tag, type GpuMemory } from '../src/index.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main(): Promise<void> {
  const cli = new Map<string, string>();
  for (const a of process.argv.slice(2)) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (m) cli.set(m[1], m[2] ?? 'true');
  }
  const num = (k: string, d: number): number => Number(cli.get(k) ?? d);
  const T = num('T', 1), E = num('E', 64), k = num('k', 6), K = num('K', 2048), I = num('I', 1408), reps = num('reps', 200);
  const int4 = (cli.get('variant') ?? 'int4') === 'int4';
  const eng = await Engine.create({ kind: 'gpu' });
  const wdt = int4 ? dt.s4 : dt.f32;
  const pd = new moe.layer.PrimitiveDesc(eng, {
    tokens: T, hidden: K, intermediate: I, experts: E, topK: k, routing: { renormalize: true },
    weights: { w13: memory.desc([E, K, 2 * I], wdt, tag.abc), w2: memory.desc([E, I, K], wdt, tag.abc) },
    ...(int4 ? { weightScales: { w13: { mask: 7, groups: [1, 32, 1] }, w2: { mask: 7, groups: [1, 32, 1] } } } : {}),
  });
  console.log(`T=${T} E=${E} k=${k} K=${K} I=${I} ${int4 ? 'int4' : 'f32'}: ${pd.implInfo}`);
  const layer = new moe.layer.Primitive(pd);
  const mem = (md: MemoryDesc | undefined): GpuMemory => Memory.create(md!, eng);
  const hidden = mem(pd.queryMd('hidden')).write(new Float32Array(T * K).map((_, i) => Math.sin(i)));
  const logits = mem(pd.queryMd('logits')).write(new Float32Array(T * E).map((_, i) => Math.cos(i * 1.7)));
  const out = mem(pd.queryMd('dst'));
  const args: Record<number, GpuMemory> = { [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: mem(pd.queryMd('w13')), [ARG.WEIGHTS_1]: mem(pd.queryMd('w2')), [ARG.DST]: out };
  if (int4) {
    args[ARG.ATTR_SCALES | ARG.WEIGHTS] = mem(memory.desc([E, K / 32, 2 * I], dt.f32, tag.abc)).write(new Float32Array(E * K / 32 * 2 * I).fill(0.01));
    args[ARG.ATTR_SCALES | ARG.WEIGHTS_1] = mem(memory.desc([E, I / 32, K], dt.f32, tag.abc)).write(new Float32Array(E * I / 32 * K).fill(0.01));
  }
  const strm = new Stream(eng);
  const stageMs = new Map<string, number[]>();
  const waits: number[] = [], totals: number[] = [];
  for (let r = 0; r < reps + 30; r++) {
    const t0 = performance.now();
    for (const s of layer.stages) {
      const a = performance.now();
      s.execute(strm, args);
      if (r >= 30) (stageMs.get(s.name) ?? stageMs.set(s.name, []).get(s.name)!).push(performance.now() - a);
    }
    const t1 = performance.now();
    await strm.wait();
    if (r >= 30) {
      waits.push(performance.now() - t1);
      totals.push(t1 - t0);
    }
  }
  console.log(`record (all stages) ${(median(totals) * 1000).toFixed(1)} us; wait ${(median(waits) * 1000).toFixed(1)} us`);
  for (const [name, xs] of stageMs) console.log(`  ${name}: ${(median(xs) * 1000).toFixed(1)} us`);
  const calls = await countDawnCalls(eng, 50, async () => {
    layer.execute(strm, args);
    await strm.wait();
  });
  const total = calls.reduce((a, x) => a + x.us, 0);
  console.log(`Dawn calls per layer: ${calls.reduce((a, x) => a + x.calls, 0).toFixed(0)} calls, ${total.toFixed(0)} us: ${calls.map((x) => `${x.method} ${x.calls.toFixed(1)}x ${x.us.toFixed(0)}`).join(', ')}`);
  layer.destroy();
  eng.release();
}

await main();
