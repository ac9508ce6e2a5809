/**
 * `npm run bench -- --mode=moe`: the whole MoE layer (route -> dispatch -> GEMM1 + GLU -> GEMM2 with
 * scatter and routing weight -> combine), f32 packed weights, per stage; the gather-mode GEMM1 against
 * the GEMM1 on a pre-permuted copy (interleaved sample by sample); decode against streaming the touched
 * experts' weights once; and onnxruntime-web's MoE / QMoE contrib ops as peers (each in its own
 * process: ORT fixes its thread count per process), alternating with ours for --rounds rounds.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { ARG, Engine, Memory, Stream, memory, moe, reorder, tag, dt } from '../src/index.js';
import { fillRandom, timeIt, timingOf, type Timing } from './timing.js';
import { MOE_SEEDS, MOE_WEIGHT_SCALE, MOE_WORKLOADS, moeFlops, type MoeWorkload } from './moe_workloads.js';
import { LOWP_LAYER_MODES, lowpLayers, type RunnableLayer } from './moe_lowp_layer.js';

export interface MoeRow {
  workload: string;
  impl: string;
  dt: string;
  threads: number;
  median_ms: number;
  min_ms: number;
  max_ms: number;
  gflops: number;
  note?: string;
}

interface Built {
  eng: Engine;
  strm: Stream;
  layer: moe.layer.Primitive;
  args: Record<number, Memory>;
  free(): void;
}

/** Packed f32 weights of a workload from the shared seeds (one copy per engine: MoE-B's are 2.2 GB). */
async function packedWeights(w: MoeWorkload, eng: Engine, strm: Stream, pd: moe.layer.PrimitiveDesc): Promise<[Memory, Memory]> {
  const out: Memory[] = [];
  for (const [name, dims, seed] of [['w13', [w.E, w.K, 2 * w.I], MOE_SEEDS.w13], ['w2', [w.E, w.I, w.K], MOE_SEEDS.w2]] as const) {
    const plainMd = memory.desc([...dims], dt.f32, tag.abc);
    const plain = Memory.create(plainMd, eng);
    fillRandom(plain.values as Float32Array, seed, MOE_WEIGHT_SCALE);
    const p = Memory.create(pd.queryMd(name)!, eng);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, plainMd, p.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: p });
    await strm.wait();
    plain.free();
    out.push(p);
  }
  return [out[0], out[1]];
}

/** A layer on given packed weights (gemm1: gather or permute). */
async function build(w: MoeWorkload, eng: Engine, gemm1: 'gather' | 'permute', weights?: [Memory, Memory]): Promise<Built & { weights: [Memory, Memory] }> {
  const strm = new Stream(eng);
  const pd = new moe.layer.PrimitiveDesc(eng, { tokens: w.T, hidden: w.K, intermediate: w.I, experts: w.E, topK: w.k, routing: { scoring: 'softmax', renormalize: true }, glu: { alg: 'glu_swiglu', layout: 'interleaved' }, gemm1 });
  const layer = new moe.layer.Primitive(pd);
  const mem = (md: ReturnType<typeof memory.desc>, seed: number, scale = 1): Memory => {
    const m = Memory.create(md, eng);
    fillRandom(m.values as Float32Array, seed, scale);
    return m;
  };
  const hidden = mem(pd.queryMd('hidden')!, MOE_SEEDS.hidden);
  const logits = mem(pd.queryMd('logits')!, MOE_SEEDS.logits, 4);
  const out = Memory.create(pd.queryMd('dst')!, eng);
  const own = weights === undefined;
  const wts = weights ?? (await packedWeights(w, eng, strm, pd));
  const args = { [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: wts[0], [ARG.WEIGHTS_1]: wts[1], [ARG.DST]: out };
  return { eng, strm, layer, args, weights: wts, free: () => { layer.destroy(); [hidden, logits, out, ...(own ? wts : [])].forEach((m) => m.free()); } };
}

/** Times two async functions alternately, sample by sample (same interference for both). */
async function timeAlternating(a: () => Promise<void>, b: () => Promise<void>, minMs: number): Promise<[Timing, Timing]> {
  for (let i = 0; i < 2; i++) { await a(); await b(); }
  const ta: number[] = [], tb: number[] = [];
  const start = performance.now();
  while (ta.length < 7 || (performance.now() - start < minMs && ta.length < 200)) {
    let t0 = performance.now();
    await a();
    ta.push(performance.now() - t0);
    t0 = performance.now();
    await b();
    tb.push(performance.now() - t0);
  }
  return [timingOf(ta), timingOf(tb)];
}

const row = (w: MoeWorkload, impl: string, threads: number, t: Timing, flops: number, note?: string): MoeRow => ({
  workload: w.name, impl, dt: 'f32', threads, median_ms: t.median, min_ms: t.min, max_ms: t.max, gflops: flops ? flops / t.median / 1e6 : 0, note,
});

/** One round of ours on one engine: layer, stages, gather vs permute GEMM1, decode vs streaming. */
export async function moeRound(w: MoeWorkload, threads: number, isa: 'auto' | 'simd128' | 'relaxed', minMs: number): Promise<MoeRow[]> {
  const rows: MoeRow[] = [];
  const eng = await Engine.create({ threads, kernels: isa });
  const g = await build(w, eng, 'gather');
  const run = async (): Promise<void> => {
    g.layer.execute(g.strm, g.args);
    await g.strm.wait();
  };
  const t = await timeIt(run, { minMs });
  const isaName = eng.isa ?? 'none';
  rows.push(row(w, `groupdnn:moe.layer:${isaName}`, threads, t, moeFlops(w), `${g.layer.pd.implInfo}`));
  // Stages one by one (each on the workspace the full run left).
  const stageMs: Record<string, number> = {};
  for (const s of g.layer.stages) {
    const ts = await timeIt(async () => {
      s.execute(g.strm, g.args);
      await g.strm.wait();
    }, { minMs: Math.min(minMs, 400), minRuns: 5 });
    stageMs[s.name] = ts.median;
    rows.push(row(w, `stage:${s.name}`, threads, ts, 0, s.implInfo));
  }
  const overhead = (stageMs.route ?? 0) + (stageMs.dispatch ?? 0) + (stageMs.combine ?? 0);
  rows.push({ ...row(w, 'route+dispatch+combine / layer', threads, t, 0), median_ms: overhead, note: `ratio=${(overhead / t.median).toFixed(4)} (target <= 0.05)` });
  // GEMM1 with gather vs GEMM1 on the permuted copy, alternating.
  const p = await build(w, eng, 'permute', g.weights);
  p.layer.execute(p.strm, p.args);
  await p.strm.wait();
  const stage = (b: Built) => async (): Promise<void> => {
    b.layer.stage('gemm1').execute(b.strm, b.args);
    await b.strm.wait();
  };
  const [tg, tp] = await timeAlternating(stage(g), stage(p), minMs);
  rows.push(row(w, 'gemm1:gather', threads, tg, 2 * w.T * w.k * w.K * 2 * w.I, `gather/permuted=${(tg.median / tp.median).toFixed(3)} (target <= 1.05)`));
  rows.push(row(w, 'gemm1:permuted', threads, tp, 2 * w.T * w.k * w.K * 2 * w.I));
  if (w.T <= 8 && eng.kernels) {
    // Decode: the touched experts' packed weights streamed once (w13 then w2 of each), the floor a layer can reach.
    const ids = g.layer.workspace.topkIds.values as Int32Array;
    const touched = [...new Set(Array.from(ids))];
    const per13 = w.K * 2 * w.I, per2 = w.I * w.K;
    const k = eng.kernels;
    const w13 = g.args[ARG.WEIGHTS], w2 = g.args[ARG.WEIGHTS_1];
    const ts = await timeIt(() => {
      for (const e of touched) {
        k.stream_f32(w13.handles[0] + e * per13 * 4, per13);
        k.stream_f32(w2.handles[0] + e * per2 * 4, per2);
      }
    }, { minMs });
    const bytes = touched.length * (per13 + per2) * 4;
    rows.push(row(w, 'stream-touched-weights-once', threads, ts, 0, `experts=${touched.length} ${(bytes / 1e6).toFixed(0)}MB ${(bytes / ts.median / 1e6).toFixed(1)}GB/s layer/stream=${(t.median / ts.median).toFixed(3)} (target <= 1.5)`));
  }
  p.free();
  g.free();
  // Weight-only int8 / int4 layers (QMoE's quantization, packed code panels): beside ORT's QMoE rows.
  if (eng.kernels && process.env.GROUPDNN_BENCH_MOE_LOWP !== '0') {
    for (const bits of [8, 4] as const) {
      // exact, accumulation_mode relaxed (rfcs/0007) and dynamic int8 activations (rfcs/0006) on one copy of the packed weights
      const layers = await lowpLayers(eng, bits, LOWP_LAYER_MODES.map((mode) => ({ w, mode })));
      for (const [i, l] of layers.entries()) {
        const mode = LOWP_LAYER_MODES[i];
        const t = await timeIt(l.run, { minMs });
        rows.push(row(w, `groupdnn:moe.layer:w${bits}${mode === 'strict' ? '' : `:${mode}`}`, threads, t, moeFlops(w), l.implInfo));
      }
      layers.forEach((l) => l.free());
    }
  }
  eng.release();
  return rows;
}

/** groupdnn's round in a child process (its heaps go back to the OS at exit). */
export function moeRoundChild(w: MoeWorkload, threads: number, isa: string, minMs: number): MoeRow[] {
  const cli = fileURLToPath(new URL('./moe_round_cli.ts', import.meta.url));
  const child = spawnSync(process.execPath, [...process.execArgv, cli, `--workload=${w.name}`, `--threads=${threads}`, `--isa=${isa}`, `--min-ms=${minMs}`], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const lines = child.stdout.trim().split('\n').filter((l) => l.startsWith('{'));
  if (child.status !== 0 || lines.length === 0) throw new Error(`groupdnn MoE round failed: ${child.stderr.slice(-2000)}`);
  return lines.map((l) => JSON.parse(l) as MoeRow);
}

/** onnxruntime-web's MoE / QMoE in a child process; undefined when the peer is not available. */
export function ortMoeRow(w: MoeWorkload, threads: number, variant: string, minMs: number): MoeRow | undefined {
  const cli = fileURLToPath(new URL('./ort_moe_peer_cli.ts', import.meta.url));
  if (!existsSync(cli)) return undefined;
  const child = spawnSync(process.execPath, [...process.execArgv, cli, `--workload=${w.name}`, `--threads=${threads}`, `--variant=${variant}`, `--min-ms=${minMs}`], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const line = child.stdout.trim().split('\n').pop() ?? '';
  if (child.status !== 0 || !line.startsWith('{')) throw new Error(`onnxruntime-web MoE peer failed: ${child.stderr.slice(-2000)}`);
  const r = JSON.parse(line) as { medianMs: number; minMs?: number; maxMs?: number; runs?: number; note?: string };
  return { workload: w.name, impl: `onnxruntime-web:${variant}`, dt: variant, threads, median_ms: r.medianMs, min_ms: r.minMs ?? r.medianMs, max_ms: r.maxMs ?? r.medianMs, gflops: moeFlops(w) / r.medianMs / 1e6, note: r.note };
}

export function moeWorkloads(names: string | undefined): MoeWorkload[] {
  return (names ?? 'moe-b,mixtral,decode-4').split(',').map((n) => {
    const w = MOE_WORKLOADS[n];
    if (!w) throw new Error(`unknown moe workload ${n}; built-in: ${Object.keys(MOE_WORKLOADS).join(', ')}`);
    return w;
  });
}

/** f32 layers (gemm1 gather) of workloads of the same E, K, I on `eng`, on one copy of the packed weights (the
    first layer's: free them all together). */
export async function f32Layers(ws: readonly MoeWorkload[], eng: Engine): Promise<RunnableLayer[]> {
  const first = await build(ws[0], eng, 'gather');
  const built = [first];
  for (const w of ws.slice(1)) built.push(await build(w, eng, 'gather', first.weights));
  return built.map((b) => ({
    run: async () => {
      b.layer.execute(b.strm, b.args);
      await b.strm.wait();
    },
    implInfo: b.layer.pd.implInfo,
    free: b.free, // the first frees the shared weights too: free them all together
  }));
}
