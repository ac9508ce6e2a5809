/**
 * The whole MoE layer on the gpu engine: `npm run bench -- --engine=gpu --mode=moe` (or this file
 * bundled for the device machine). In one process: Dawn's floor (one tiny dispatch + wait), then per
 * workload and weight variant the layer from router logits to output (one submit, wait included) and
 * each stage alone (its own submit + wait, so each stage time carries one floor). Medians of --reps.
 *
 *   --workloads=moe-b,decode-1,decode-4,qwen3-decode-1,qwen3-prefill-256   (bench/moe_workloads.ts names + qwen3-*)
 *   --variants=f32,int4,int8,w8a8   --reps=10   --stages=true
 *   --dawn-calls=true: also count the Dawn methods one layer.execute + wait calls, with their host time
 *   --fuse=true|false|both: moe.layer's route + dispatch as one dispatch at decode sizes (default true;
 *     both: each row twice in this process, fused first; `fused` / `refused` in the line say which ran)
 *   --spin-ms=1500: GPU kept busy this long before each row is timed (sustained clocks: gpu_clock_warmup.ts)
 * Writes JSON to $OUT/gpu_moe_bench.json when OUT is set.
 */
import { writeFileSync } from 'node:fs';
import { Engine, Stream, dt, moe, type GpuEngine } from '../src/index.js';
import { MOE_WORKLOADS, moeFlops, type MoeWorkload } from './moe_workloads.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';
import { countDawnCalls, layerMemories, layerPd, variantConfig, type GpuMoeVariant } from './gpu_bench_common.js';
import { gpuLayerTuning } from '../src/primitives/moe/layer/route_dispatch_gpu.js';

export type { GpuMoeVariant };

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
  /** The layer's fused stages (`layer.fused`), or why route + dispatch were not fused. */
  fused: string;
  /** Per layer (execute + wait): each Dawn method's calls and host time, most expensive first (--dawn-calls). */
  dawnCalls?: { method: string; calls: number; us: number }[];
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
  /** Route + dispatch fused at decode sizes: on (default), off, or each row both ways. */
  fuse?: 'true' | 'false' | 'both';
  log?: (line: string) => void;
}

/** One layer, timed whole and stage by stage. */
async function measure(eng: GpuEngine, w: MoeWorkload, v: GpuMoeVariant, o: GpuMoeOptions): Promise<GpuMoeRow> {
  const { wdt } = variantConfig(v);
  const strm = new Stream(eng);
  const pd = layerPd(eng, w, v);
  const layer = new moe.layer.Primitive(pd);
  const fused = layer.fused.length ? `fused ${layer.fused.map((f) => f.stages.join('+')).join(', ')}` : `refused (${layer.fusedRefusal})`;
  const { args, owned } = layerMemories(eng, pd, w, v);
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
  return { workload: w.name, variant: v, layerMs, hostMs: median(host), gpuMs, passes, tflops: moeFlops(w) / layerMs / 1e9, touchedWeightBytes: touched * perExpert, stages, fused, dawnCalls };
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

/**
 * Dawn's floor for the submit a decode layer makes, with no library code and no work in it: one validation
 * error scope, one encoder with one compute pass of `dispatches` one-workgroup dispatches (pipeline and bind
 * group set for each), a 256-byte status copy, submit, then the copy mapped and read (the wait). A layer's
 * wall cannot go below this plus its kernels' own GPU time.
 */
async function submitFloorMs(eng: GpuEngine, dispatches: number, reps: number): Promise<number> {
  const dev = eng.device;
  const p = eng.pipeline('bench-moe-floor', () => '@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3u) { b[i.x] = b[i.x] + 1u; }');
  const buf = dev.createBuffer({ size: 256, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const read = dev.createBuffer({ size: 256, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const bg = dev.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
  const ms = await timed(async () => {
    dev.pushErrorScope('validation');
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (let d = 0; d < dispatches; d++) {
      pass.setPipeline(p);
      pass.setBindGroup(0, bg);
      pass.dispatchWorkgroups(1);
    }
    pass.end();
    enc.copyBufferToBuffer(buf, 0, read, 0, 256);
    dev.queue.submit([enc.finish()]);
    const scope = dev.popErrorScope();
    await read.mapAsync(GPUMapMode.READ);
    void new Uint32Array(read.getMappedRange())[0];
    read.unmap();
    if (await scope) throw new Error('submit floor: validation error');
  }, reps * 3);
  buf.destroy();
  read.destroy();
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
    // A decode layer submits 4 dispatches (route+dispatch fused, two GEMMs, combine) and reads its status.
    for (const d of [1, 4, 5]) log(`submit floor (error scope, ${d} one-workgroup dispatch${d > 1 ? 'es' : ''}, status copy + map): ${(await submitFloorMs(e, d, o.reps) * 1000).toFixed(1)} us`);
    const rows: GpuMoeRow[] = [];
    for (const name of o.workloads) {
      const w = gpuMoeWorkload(name);
      for (const v of o.variants) for (const fuse of o.fuse === 'both' ? [true, false] : [o.fuse !== 'false']) {
        gpuLayerTuning.fuseRouteDispatch = fuse;
        const r = await measure(e, w, v, o);
        gpuLayerTuning.fuseRouteDispatch = true;
        rows.push(r);
        const st = r.stages.map((s) => `${s.name} ${s.ms.toFixed(3)}`).join(', ');
        const gpu = r.gpuMs === undefined ? '' : `; GPU passes ${r.gpuMs.toFixed(3)} ms = ${r.passes.map((x) => `${x.label} ${(x.ms * 1000).toFixed(0)}`).join(' + ')} us`;
        log(`${w.name} (T=${w.T} E=${w.E} k=${w.k} K=${w.K} I=${w.I}) ${v} [${r.fused}]: layer ${r.layerMs.toFixed(3)} ms (host recording ${r.hostMs.toFixed(3)} ms; ${r.tflops.toFixed(2)} TFLOP/s; touched weights ${(r.touchedWeightBytes / 1e6).toFixed(1)} MB)${gpu}${st ? `; stages alone (ms, each with its own wait): ${st}` : ''}`);
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
    fuse: (args.get('fuse') ?? 'true') as GpuMoeOptions['fuse'],
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
