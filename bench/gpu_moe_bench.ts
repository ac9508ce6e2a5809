/**
 * The whole MoE layer on the gpu engine: `npm run bench -- --engine=gpu --mode=moe` (or this file
 * bundled for the device machine). In one process: Dawn's floor (one tiny dispatch + wait), then per
 * workload and weight variant the layer from router logits to output (one submit, wait included) and
 * each stage alone (its own submit + wait, so each stage time carries one floor). Medians of --reps.
 *
 *   --workloads=moe-b,decode-1,decode-4,qwen3-decode-1,qwen3-prefill-256   (bench/moe_workloads.ts names + qwen3-*)
 *   --variants=f32,int4,int8,w8a8   --reps=10   --stages=true
 *   --dawn-calls=true: also count the Dawn methods one layer.execute + wait calls, with their host time
 *   --spin-ms=1500: GPU kept busy this long before each row is timed (sustained clocks: gpu_clock_warmup.ts)
 * Writes JSON to $OUT/gpu_moe_bench.json when OUT is set.
 */
import { writeFileSync } from 'node:fs';
import { ARG, Engine, Memory, MemoryDesc, Stream, dt, memory, moe, tag, type DataType, type GpuEngine, type GpuMemory } from '../src/index.js';
import { MOE_WORKLOADS, moeFlops, type MoeWorkload } from './moe_workloads.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';

export type GpuMoeVariant = 'f32' | 'int4' | 'int8' | 'w8a8';

/** Qwen3-30B-A3B's MoE layer (hidden 2048, 128 experts, top-8, intermediate 768) at decode and prefill token counts. */
export function qwen3Workload(T: number): MoeWorkload {
  return { name: `qwen3-${T === 1 || T <= 8 ? 'decode' : 'prefill'}-${T}`, T, E: 128, k: 8, K: 2048, I: 768, description: `Qwen3-30B-A3B MoE layer, T=${T}` };
}

export function gpuMoeWorkload(name: string): MoeWorkload {
  const q = /^qwen3-(?:decode|prefill)-(\d+)$/.exec(name);
  if (q) return qwen3Workload(Number(q[1]));
  const w = MOE_WORKLOADS[name];
  if (!w) throw new Error(`unknown workload '${name}' (${[...Object.keys(MOE_WORKLOADS), 'qwen3-decode-N', 'qwen3-prefill-N'].join(', ')})`);
  return w;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function timed(fn: () => Promise<void>, reps: number, warmup = 3): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    t.push(performance.now() - t0);
  }
  return median(t);
}

/** Deterministic bytes in 64 MiB chunks: f32 values in [-amp, amp], or random codes for the integer types. */
function fill(m: GpuMemory, t: DataType, amp: number, seed: number): void {
  const bytes = m.byteSizes[0];
  const chunk = new Uint8Array(Math.min(bytes, 64 << 20));
  let s = seed >>> 0;
  if (t === 'f32') {
    const f = new Float32Array(chunk.buffer);
    for (let i = 0; i < f.length; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      f[i] = ((s >>> 8) / 16777216 * 2 - 1) * amp;
    }
  } else {
    for (let i = 0; i < chunk.length; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      chunk[i] = s >>> 24;
    }
  }
  for (let off = 0; off < bytes; off += chunk.length) m.writeBytes(chunk.subarray(0, Math.min(chunk.length, bytes - off)), 0, off);
}

/** The layer's config and weight types of a variant; quantized weights with their scales given at execute. */
function variantConfig(v: GpuMoeVariant): { wdt: DataType; cfg: Partial<moe.layer.LayerConfig>; scales: (dims: readonly number[]) => number[] | undefined } {
  const blocks = (d: readonly number[]): number[] => [d[0], d[1] / 32, d[2]];
  if (v === 'int4') return { wdt: dt.s4, cfg: { weightScales: { w13: { mask: 7, groups: [1, 32, 1] }, w2: { mask: 7, groups: [1, 32, 1] } } }, scales: blocks };
  if (v === 'int8') return { wdt: dt.s8, cfg: { weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } }, scales: (d) => [d[0], d[2]] };
  if (v === 'w8a8') return { wdt: dt.s8, cfg: { quant: 'w8a8_dynamic', weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } }, scales: (d) => [d[0], d[2]] };
  return { wdt: dt.f32, cfg: {}, scales: () => undefined };
}

export interface GpuMoeRow {
  workload: string;
  variant: GpuMoeVariant;
  layerMs: number;
  /** Of which the host spends recording the stages (layer.execute returning), median. */
  hostMs: number;
  /**
   * GPU time of the layer's compute passes (timestamp queries, `GpuEngine.setProfiling`), median over
   * runs of their sum, and each pass's median, in recording order; undefined without timestamp-query.
   */
  gpuMs: number | undefined;
  passes: { label: string; ms: number }[];
  tflops: number;
  /** Bytes of the experts' weights the routing touched, read once: the decode bound's numerator. */
  touchedWeightBytes: number;
  stages: { name: string; impl: string; ms: number }[];
  /** Per layer (execute + wait): each Dawn method's calls and host time, most expensive first (--dawn-calls). */
  dawnCalls?: { method: string; calls: number; us: number }[];
}

/**
 * Calls and host time of every Dawn method over `n` runs of `fn`, per run: the prototypes of the
 * device, queue, encoder, pass and buffer objects are wrapped for the duration (bench only).
 */
async function countDawnCalls(eng: GpuEngine, n: number, fn: () => Promise<void>): Promise<{ method: string; calls: number; us: number }[]> {
  const dev = eng.device;
  const enc = dev.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.end();
  enc.finish();
  const buf = dev.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
  const stats = new Map<string, { calls: number; ms: number }>();
  const undo: (() => void)[] = [];
  for (const [obj, cls] of [[dev, 'device'], [dev.queue, 'queue'], [enc, 'encoder'], [pass, 'pass'], [buf, 'buffer']] as const) {
    const proto = Object.getPrototypeOf(obj) as Record<string, unknown>;
    for (const k of Object.getOwnPropertyNames(proto)) {
      const d = Object.getOwnPropertyDescriptor(proto, k);
      if (!d || typeof d.value !== 'function' || k === 'constructor') continue;
      const f = d.value as (...a: unknown[]) => unknown;
      proto[k] = function (this: unknown, ...a: unknown[]): unknown {
        const t0 = performance.now();
        try {
          return f.apply(this, a);
        } finally {
          const s = stats.get(`${cls}.${k}`) ?? { calls: 0, ms: 0 };
          s.calls++;
          s.ms += performance.now() - t0;
          stats.set(`${cls}.${k}`, s);
        }
      };
      undo.push(() => { proto[k] = f; });
    }
  }
  try {
    for (let i = 0; i < n; i++) await fn();
  } finally {
    for (const u of undo) u();
    buf.destroy();
  }
  return [...stats].map(([method, s]) => ({ method, calls: s.calls / n, us: (s.ms / n) * 1000 })).sort((a, b) => b.us - a.us);
}

export interface GpuMoeOptions {
  workloads: string[];
  variants: GpuMoeVariant[];
  reps: number;
  stages: boolean;
  /** Count each Dawn method called per layer (execute + wait) and its host time. */
  dawnCalls?: boolean;
  /** Milliseconds of sustained GPU work before each row is timed (gpu_clock_warmup.ts). */
  spinMs?: number;
  log?: (line: string) => void;
}

/** One layer, timed whole and stage by stage. */
async function measure(eng: GpuEngine, w: MoeWorkload, v: GpuMoeVariant, o: GpuMoeOptions): Promise<GpuMoeRow> {
  const { wdt, cfg, scales } = variantConfig(v);
  const strm = new Stream(eng);
  const w13Dims = [w.E, w.K, 2 * w.I], w2Dims = [w.E, w.I, w.K];
  const pd = new moe.layer.PrimitiveDesc(eng, {
    tokens: w.T, hidden: w.K, intermediate: w.I, experts: w.E, topK: w.k, routing: { renormalize: true },
    weights: { w13: memory.desc(w13Dims, wdt, tag.abc), w2: memory.desc(w2Dims, wdt, tag.abc) }, ...cfg,
  });
  const layer = new moe.layer.Primitive(pd);
  const mem = (md: MemoryDesc | undefined): GpuMemory => Memory.create(md!, eng);
  const w13 = mem(pd.queryMd('w13')), w2 = mem(pd.queryMd('w2'));
  // Weights scaled so the activations stay O(1) through both GEMMs.
  fill(w13, wdt, 0.05, 103);
  fill(w2, wdt, 0.05, 104);
  const hidden = mem(pd.queryMd('hidden')), logits = mem(pd.queryMd('logits')), out = mem(pd.queryMd('dst'));
  fill(hidden, dt.f32, 1, 101);
  fill(logits, dt.f32, 4, 102);
  const args: Record<number, GpuMemory> = { [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: out };
  const owned = [w13, w2, hidden, logits, out];
  for (const [id, dims] of [[ARG.WEIGHTS, w13Dims], [ARG.WEIGHTS_1, w2Dims]] as const) {
    const sd = scales(dims);
    if (!sd) continue;
    const s = mem(memory.desc(sd, dt.f32, sd.length === 3 ? tag.abc : tag.ab));
    // |code| <= 127 (int8) or 8 (int4): scales keep |w| around 0.05.
    s.write(new Float32Array(sd.reduce((a, b) => a * b, 1)).fill(wdt === dt.s4 ? 0.05 / 8 : 0.05 / 128));
    args[ARG.ATTR_SCALES | id] = s;
    owned.push(s);
  }
  await keepGpuBusy(eng, o.spinMs ?? 0);
  const host: number[] = [];
  // 20 warm-up runs: the first executions of a process still run unoptimized JavaScript.
  const layerMs = await timed(async () => {
    const t0 = performance.now();
    layer.execute(strm, args);
    host.push(performance.now() - t0);
    await strm.wait();
  }, o.reps, 20);
  host.splice(0, 20);
  let gpuMs: number | undefined;
  const passes: GpuMoeRow['passes'] = [];
  if (eng.caps.timestampQuery) {
    eng.setProfiling(true);
    const runs: { label: string; ms: number }[][] = [];
    try {
      for (let r = 0; r < o.reps; r++) {
        layer.execute(strm, args);
        await strm.wait();
        runs.push(eng.takeProfile());
      }
    } finally {
      eng.setProfiling(false);
    }
    gpuMs = median(runs.map((r) => r.reduce((a, x) => a + x.ms, 0)));
    for (let j = 0; j < runs[0].length; j++) passes.push({ label: runs[0][j].label, ms: median(runs.map((r) => r[j]?.ms ?? 0)) });
  }
  const ids = await layer.workspace.topkIds.read();
  const touched = new Set(Array.from(ids)).size;
  const bitsPerWeight = wdt === dt.s4 ? 4 : wdt === dt.s8 ? 8 : 32;
  const perExpert = (w.K * 2 * w.I + w.I * w.K) * bitsPerWeight / 8 + (wdt === dt.s4 ? (w.K / 32 * 2 * w.I + w.I / 32 * w.K) * 4 : wdt === dt.s8 ? (2 * w.I + w.K) * 4 : 0);
  const dawnCalls = o.dawnCalls ? await countDawnCalls(eng, 20, async () => {
    layer.execute(strm, args);
    await strm.wait();
  }) : undefined;
  const stages: GpuMoeRow['stages'] = [];
  if (o.stages) {
    for (const st of layer.stages) {
      const ms = await timed(async () => {
        st.execute(strm, args);
        await strm.wait();
      }, o.reps, 2);
      stages.push({ name: st.name, impl: st.implInfo, ms });
    }
  }
  layer.destroy();
  for (const m of owned) m.free();
  return { workload: w.name, variant: v, layerMs, hostMs: median(host), gpuMs, passes, tflops: moeFlops(w) / layerMs / 1e9, touchedWeightBytes: touched * perExpert, stages, dawnCalls };
}

async function floorMs(eng: GpuEngine, reps: number): Promise<number> {
  const p = eng.pipeline('bench-moe-floor', () => '@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3u) { b[i.x] = b[i.x] + 1u; }');
  const buf = eng.createBuffer(256, 'floor');
  const strm = new Stream(eng);
  const ms = await timed(async () => {
    const bg = eng.device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
    eng.encode('floor', (enc) => {
      const pass = enc.beginComputePass();
      pass.setPipeline(p);
      pass.setBindGroup(0, bg);
      pass.dispatchWorkgroups(1);
      pass.end();
    });
    await strm.wait();
  }, reps * 3);
  eng.retire(buf);
  return ms;
}

export async function runGpuMoe(o: GpuMoeOptions, eng?: GpuEngine): Promise<{ floorMs: number; rows: GpuMoeRow[] }> {
  const log = o.log ?? ((l: string) => console.log(l));
  const own = eng === undefined;
  const e = eng ?? await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' });
  try {
    log(`gpu: ${e.adapterInfo} (${e.source}); node ${process.version}`);
    const floor = await floorMs(e, o.reps);
    log(`floor (1 dispatch + wait): ${(floor * 1000).toFixed(1)} us`);
    const rows: GpuMoeRow[] = [];
    for (const name of o.workloads) {
      const w = gpuMoeWorkload(name);
      for (const v of o.variants) {
        const r = await measure(e, w, v, o);
        rows.push(r);
        const st = r.stages.map((s) => `${s.name} ${s.ms.toFixed(3)}`).join(', ');
        const gpu = r.gpuMs === undefined ? '' : `; GPU passes ${r.gpuMs.toFixed(3)} ms = ${r.passes.map((x) => `${x.label} ${(x.ms * 1000).toFixed(0)}`).join(' + ')} us`;
        log(`${w.name} (T=${w.T} E=${w.E} k=${w.k} K=${w.K} I=${w.I}) ${v}: layer ${r.layerMs.toFixed(3)} ms (host recording ${r.hostMs.toFixed(3)} ms; ${r.tflops.toFixed(2)} TFLOP/s; touched weights ${(r.touchedWeightBytes / 1e6).toFixed(1)} MB)${gpu}${st ? `; stages alone (ms, each with its own wait): ${st}` : ''}`);
        if (r.dawnCalls) {
          const total = r.dawnCalls.reduce((a, x) => a + x.us, 0);
          log(`  Dawn calls per layer (execute + wait): ${total.toFixed(0)} us of host time in ${r.dawnCalls.reduce((a, x) => a + x.calls, 0).toFixed(0)} calls: ${r.dawnCalls.map((x) => `${x.method} ${x.calls.toFixed(1)}x ${x.us.toFixed(0)} us`).join(', ')}`);
        }
      }
    }
    if (process.env.OUT) writeFileSync(`${process.env.OUT}/gpu_moe_bench.json`, JSON.stringify({ adapter: e.adapterInfo, caps: e.caps, node: process.version, floorMs: floor, rows }, null, 2));
    return { floorMs: floor, rows };
  } finally {
    if (own) e.release();
  }
}

/** CLI options shared by bench.ts (`--engine=gpu --mode=moe`) and the bundled entry. */
export function gpuMoeOptionsFrom(args: ReadonlyMap<string, string>): GpuMoeOptions {
  return {
    workloads: (args.get('workloads') ?? args.get('workload') ?? 'decode-1,decode-4,moe-b,qwen3-decode-1,qwen3-prefill-256').split(','),
    variants: (args.get('variants') ?? 'f32,int4,int8,w8a8').split(',') as GpuMoeVariant[],
    reps: Number(args.get('reps') ?? 10),
    stages: (args.get('stages') ?? 'true') !== 'false',
    dawnCalls: args.get('dawn-calls') === 'true',
    spinMs: Number(args.get('spin-ms') ?? 1500),
  };
}

// Run directly (`npx tsx bench/gpu_moe_bench.ts --workloads=...`, or bundled with esbuild for the device machine).
const entry = process.argv[1];
if (entry !== undefined && /gpu_moe_bench\.(ts|mjs|js)$/.test(entry)) {
  const cli = new Map<string, string>();
  for (const a of process.argv.slice(2)) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (m) cli.set(m[1], m[2] ?? 'true');
  }
  await runGpuMoe(gpuMoeOptionsFrom(cli));
}
