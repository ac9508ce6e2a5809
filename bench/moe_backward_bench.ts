/**
 * The MoE layer's backward against its forward (`npm run bench -- --mode=moe-backward`): the training
 * forward, the inference forward (packed weights, as `--mode=moe` runs it) and the backward on the
 * same inputs, alternating sample by sample so that all see the same interference; then the
 * backward's stages one by one. One process per thread count (multi-GB heaps go back at exit):
 *   npx tsx bench/moe_backward_bench.ts --workload=moe-b-e32 --threads=1 --min-ms=1500
 * MoE-B with E = 32 (T = 256, k = 6, K = 2048, I = 1408): with E = 64, weights + weight gradients
 * (4.4 GB) do not fit a 32-bit wasm heap.
 */
import { pathToFileURL } from 'node:url';
import { ARG, Engine, Memory, Stream, moe, reorder, type MemoryDesc } from '../src/index.js';
import { fillRandom, timingOf, type Timing } from './timing.js';
import { MOE_SEEDS, MOE_WEIGHT_SCALE, type MoeWorkload } from './moe_workloads.js';

export const MOE_BACKWARD_WORKLOADS: Readonly<Record<string, MoeWorkload>> = {
  'moe-b-e32': { name: 'moe-b-e32', T: 256, E: 32, k: 6, K: 2048, I: 1408, description: 'MoE-B per-expert shapes, E = 32: T=256 top-6 K=2048 I=1408' },
  small: { name: 'small', T: 64, E: 8, k: 2, K: 256, I: 192, description: 'small layer: T=64 E=8 top-2 K=256 I=192' },
};

export interface MoeBackwardRow {
  readonly workload: string;
  readonly what: string;
  readonly threads: number;
  readonly median_ms: number;
  readonly min_ms: number;
  readonly max_ms: number;
  readonly note: string;
}

async function alternate(fns: readonly (() => Promise<void>)[], minMs: number): Promise<Timing[]> {
  for (let i = 0; i < 2; i++) for (const f of fns) await f();
  const t: number[][] = fns.map(() => []);
  const start = performance.now();
  while (t[0].length < 5 || (performance.now() - start < minMs * fns.length && t[0].length < 100)) {
    for (let i = 0; i < fns.length; i++) {
      const t0 = performance.now();
      await fns[i]();
      t[i].push(performance.now() - t0);
    }
  }
  return t.map(timingOf);
}

export async function moeBackwardRound(w: MoeWorkload, threads: number, minMs: number): Promise<MoeBackwardRow[]> {
  const eng = await Engine.create({ threads });
  const strm = new Stream(eng);
  const config = { tokens: w.T, hidden: w.K, intermediate: w.I, experts: w.E, topK: w.k, routing: { scoring: 'softmax', renormalize: true }, glu: { alg: 'glu_swiglu', layout: 'interleaved' } } as const;
  const pd = new moe.layer.PrimitiveDesc(eng, { ...config, propKind: 'forward_training' });
  const fwd = new moe.layer.Primitive(pd);
  const bpd = new moe.layer.BackwardPrimitiveDesc(eng, pd);
  const bwd = new moe.layer.BackwardPrimitive(bpd, fwd);
  const mem = (md: MemoryDesc, seed?: number, scale = 1): Memory => {
    const m = Memory.create(md, eng);
    if (seed !== undefined) fillRandom(m.values as Float32Array, seed, scale);
    return m;
  };
  const w13 = mem(pd.queryMd('w13')!, MOE_SEEDS.w13, MOE_WEIGHT_SCALE), w2 = mem(pd.queryMd('w2')!, MOE_SEEDS.w2, MOE_WEIGHT_SCALE);
  const a = {
    [ARG.SRC]: mem(pd.queryMd('hidden')!, MOE_SEEDS.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(pd.queryMd('logits')!, MOE_SEEDS.logits, 4),
    [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: mem(pd.queryMd('dst')!),
  };
  const b = {
    [ARG.DIFF_DST]: mem(bpd.queryMd('diff_dst')!, 7, 0.01), [ARG.MOE_ROUTER_LOGITS]: a[ARG.MOE_ROUTER_LOGITS], [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2,
    [ARG.DIFF_SRC]: mem(bpd.queryMd('diff_src')!), [ARG.MOE_DIFF_ROUTER_LOGITS]: mem(bpd.queryMd('diff_logits')!),
    [ARG.DIFF_WEIGHTS]: mem(bpd.queryMd('diff_w13')!), [ARG.DIFF_WEIGHTS_1]: mem(bpd.queryMd('diff_w2')!),
  };
  // The inference layer on packed copies of the same weights (reorders into the pd's tag.any choice).
  const ipd = new moe.layer.PrimitiveDesc(eng, config);
  const inf = new moe.layer.Primitive(ipd);
  const packed = [mem(ipd.queryMd('w13')!), mem(ipd.queryMd('w2')!)];
  for (const [from, to] of [[w13, packed[0]], [w2, packed[1]]] as const) new reorder.Primitive(new reorder.PrimitiveDesc(eng, from.desc, to.desc)).execute(strm, { [ARG.FROM]: from, [ARG.TO]: to });
  const ia = { ...a, [ARG.WEIGHTS]: packed[0], [ARG.WEIGHTS_1]: packed[1], [ARG.DST]: mem(pd.queryMd('dst')!) };
  await strm.wait();
  const run = (f: () => void) => async (): Promise<void> => {
    f();
    await strm.wait();
  };
  const [tf, tb, ti] = await alternate([run(() => fwd.execute(strm, a)), run(() => bwd.execute(strm, b)), run(() => inf.execute(strm, ia))], minMs);
  const row = (what: string, t: Timing, note = ''): MoeBackwardRow => ({ workload: w.name, what, threads, median_ms: t.median, min_ms: t.min, max_ms: t.max, note });
  const rows: MoeBackwardRow[] = [
    row('forward_training', tf),
    row('forward_inference (packed)', ti),
    row('backward', tb, `backward/forward_training=${(tb.median / tf.median).toFixed(3)} backward/forward_inference=${(tb.median / ti.median).toFixed(3)} (target <= 2.5)`),
  ];
  fwd.execute(strm, a);
  await strm.wait();
  for (const s of bwd.stages) {
    const [ts] = await alternate([run(() => s.execute(strm, b))], Math.min(minMs, 300));
    rows.push(row(`bwd:${s.name}`, ts, s.implInfo));
  }
  for (const s of fwd.stages) {
    const [ts] = await alternate([run(() => s.execute(strm, a))], Math.min(minMs, 300));
    rows.push(row(`fwd_training:${s.name}`, ts, s.implInfo));
  }
  bwd.destroy();
  fwd.destroy();
  inf.destroy();
  eng.release();
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = new Map(process.argv.slice(2).map((x) => {
    const [k, v] = x.replace(/^--/, '').split('=');
    return [k, v ?? 'true'] as const;
  }));
  const w = MOE_BACKWARD_WORKLOADS[args.get('workload') ?? 'moe-b-e32'];
  if (!w) throw new Error(`unknown workload ${args.get('workload')}; built-in: ${Object.keys(MOE_BACKWARD_WORKLOADS).join(', ')}`);
  const rows = await moeBackwardRound(w, Number(args.get('threads') ?? 1), Number(args.get('min-ms') ?? 1500));
  for (const r of rows) console.log(JSON.stringify(r));
}
