/**
 * `npm run bench -- --mode=backward`: the grouped matmul backward against the forward GEMM of the same
 * workload (default moe-b; same flops 2 * sum(Mg) * K * N for all three), in one engine:
 *   fwd          dst = src x W                (W packed f32:p8: the forward's fast path)
 *   bwd_data     diff_src = diff_dst x W^T    (W^T packed f32:p8t by a reorder)
 *   bwd_weights  diff_weights = src^T x diff_dst   (f32 [G, K, N], every expert written)
 *   bwd_weights+bias   the same with diff_bias [G, N]
 * Rounds interleave the variants (each round: `samples` runs of every variant in turn); a round's
 * ratio is the median backward time over the median forward time of that round, the reported ratio
 * the median over rounds. Each thread count runs in its own process (gigabytes of heap per engine).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, matmul_backward_data, matmul_backward_weights, memory, offsets, reorder, tag,
} from '../src/index.js';
import { fillRandom, timingOf } from './timing.js';
import { WORKLOADS, usefulFlops, type Workload } from './workloads.js';

export interface BackwardRow {
  workload: string;
  variant: string;
  impl: string;
  threads: number;
  median_ms: number;
  min_ms: number;
  max_ms: number;
  gflops: number;
  /** Per round: median of this variant's samples / median of the forward's samples. */
  ratios: number[];
}

export const BACKWARD_VARIANTS = ['fwd', 'bwd_data', 'bwd_weights', 'bwd_weights+bias'] as const;

export async function backwardRound(w: Workload, threads: number, isa: 'auto' | 'simd128' | 'relaxed', rounds: number, samples: number): Promise<BackwardRow[]> {
  const eng = await Engine.create({ threads, kernels: isa, initialBytes: 1 << 30 });
  const strm = new Stream(eng);
  const G = w.sizes.length, M = w.sizes.reduce((a, b) => a + b, 0), { K, N } = w;
  const RT = RUNTIME_DIM_VAL;
  const rowsMd = (cols: number): ReturnType<typeof memory.desc.grouped> => memory.desc.grouped([M, cols], dt.f32, G, [RT, cols]);
  const fwdPd = new matmul.PrimitiveDesc(eng, rowsMd(K), memory.desc([G, K, N], dt.f32, tag.any), rowsMd(N));
  const dataPd = new matmul_backward_data.PrimitiveDesc(eng, rowsMd(K), memory.desc([G, K, N], dt.f32, tag.any), rowsMd(N), fwdPd);
  const wPd = new matmul_backward_weights.PrimitiveDesc(eng, rowsMd(K), memory.desc([G, K, N], dt.f32, tag.abc), rowsMd(N), fwdPd);
  const wbPd = new matmul_backward_weights.PrimitiveDesc(eng, rowsMd(K), memory.desc([G, K, N], dt.f32, tag.abc), rowsMd(N), fwdPd, undefined, memory.desc([G, N], dt.f32, tag.ab));
  const src = Memory.create(rowsMd(K), eng);
  const dst = Memory.create(rowsMd(N), eng, [undefined, src.handles[1]]);
  const dy = Memory.create(rowsMd(N), eng, [undefined, src.handles[1]]);
  const dx = Memory.create(rowsMd(K), eng, [undefined, src.handles[1]]);
  offsets.fromSizes(w.sizes, src.offsets);
  fillRandom(src.values as Float32Array, 1);
  fillRandom(dy.values as Float32Array, 2);
  // The plain weights only live until both packed copies are made (each copy is 738 MB on MoE-B).
  const plain = Memory.create(memory.desc([G, K, N], dt.f32, tag.abc), eng);
  fillRandom(plain.values as Float32Array, 3, 0.05);
  const wP8 = Memory.create(fwdPd.queryMd('weights')!, eng);
  const wP8t = Memory.create(dataPd.queryMd('weights')!, eng);
  let t0 = performance.now();
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wP8.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wP8 });
  await strm.wait();
  const reorderP8Ms = performance.now() - t0;
  t0 = performance.now();
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wP8t.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wP8t });
  await strm.wait();
  const reorderMs = performance.now() - t0;
  plain.free();
  const dw = Memory.create(wPd.queryMd('diff_weights')!, eng);
  const db = Memory.create(wbPd.queryMd('diff_bias')!, eng);
  const fwd = new matmul.Primitive(fwdPd), data = new matmul_backward_data.Primitive(dataPd);
  const bw = new matmul_backward_weights.Primitive(wPd), bwb = new matmul_backward_weights.Primitive(wbPd);
  const run: Record<(typeof BACKWARD_VARIANTS)[number], () => Promise<void>> = {
    fwd: () => { fwd.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wP8, [ARG.DST]: dst }); return strm.wait(); },
    bwd_data: () => { data.execute(strm, { [ARG.DIFF_DST]: dy, [ARG.WEIGHTS]: wP8t, [ARG.DIFF_SRC]: dx }); return strm.wait(); },
    bwd_weights: () => { bw.execute(strm, { [ARG.SRC]: src, [ARG.DIFF_DST]: dy, [ARG.DIFF_WEIGHTS]: dw }); return strm.wait(); },
    'bwd_weights+bias': () => { bwb.execute(strm, { [ARG.SRC]: src, [ARG.DIFF_DST]: dy, [ARG.DIFF_WEIGHTS]: dw, [ARG.DIFF_BIAS]: db }); return strm.wait(); },
  };
  for (const v of BACKWARD_VARIANTS) await run[v](); // warm-up: page in every buffer once
  const all: Record<string, number[]> = {}, perRound: Record<string, number[]> = {};
  for (const v of BACKWARD_VARIANTS) { all[v] = []; perRound[v] = []; }
  for (let r = 0; r < rounds; r++) {
    const mine: Record<string, number[]> = {};
    for (const v of BACKWARD_VARIANTS) mine[v] = [];
    for (let s = 0; s < samples; s++)
      for (const v of BACKWARD_VARIANTS) {
        const t = performance.now();
        await run[v]();
        mine[v].push(performance.now() - t);
      }
    for (const v of BACKWARD_VARIANTS) {
      all[v].push(...mine[v]);
      perRound[v].push(timingOf(mine[v]).median / timingOf(mine.fwd).median);
    }
  }
  const flops = usefulFlops(w);
  const impls: Record<string, string> = { fwd: fwdPd.implInfo, bwd_data: dataPd.implInfo, bwd_weights: wPd.implInfo, 'bwd_weights+bias': wbPd.implInfo };
  const rows = BACKWARD_VARIANTS.map((v): BackwardRow => {
    const t = timingOf(all[v]);
    return { workload: w.name, variant: v, impl: impls[v], threads, median_ms: t.median, min_ms: t.min, max_ms: t.max, gflops: flops / t.median / 1e6, ratios: perRound[v] };
  });
  rows.push({ workload: w.name, variant: 'reorder_p8', impl: 'reorder f32:abc -> f32:p8 (the forward\'s packing)', threads, median_ms: reorderP8Ms, min_ms: reorderP8Ms, max_ms: reorderP8Ms, gflops: 0, ratios: [] });
  rows.push({ workload: w.name, variant: 'reorder_p8t', impl: 'reorder f32:abc -> f32:p8t (once per weights update)', threads, median_ms: reorderMs, min_ms: reorderMs, max_ms: reorderMs, gflops: 0, ratios: [] });
  eng.release();
  return rows;
}

/** One thread count in a child process (bench/backward_cli.ts). */
export function backwardChild(w: Workload, threads: number, isa: string, rounds: number, samples: number): BackwardRow[] {
  const cli = fileURLToPath(new URL('./backward_cli.ts', import.meta.url));
  const child = spawnSync(process.execPath, [...process.execArgv, cli, `--workload=${w.name}`, `--threads=${threads}`, `--isa=${isa}`, `--rounds=${rounds}`, `--samples=${samples}`], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const lines = child.stdout.trim().split('\n').filter((l) => l.startsWith('{'));
  if (child.status !== 0 || lines.length === 0) throw new Error(`backward round failed: ${child.stderr.slice(-2000)}`);
  return lines.map((l) => JSON.parse(l) as BackwardRow);
}

export function backwardWorkload(name: string | undefined): Workload {
  const w = WORKLOADS[name ?? 'moe-b'];
  if (!w) throw new Error(`unknown workload ${name}; built-in: ${Object.keys(WORKLOADS).join(', ')}`);
  return w;
}
