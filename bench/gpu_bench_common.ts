/**
 * What the gpu benchmarks share (bench only): deterministic weights and activations, the weight
 * variants of the MoE layer and their memories, the routed sizes of a top-k router, and a counter of
 * Dawn calls.
 */
import { ARG, Memory, dt, memory, moe, tag, type DataType, type GpuEngine, type GpuMemory, type MemoryDesc } from '../src/index.js';
import type { MoeWorkload } from './moe_workloads.js';

/** A weight type, optionally `:permute` (gemm1 over permuted rows: dispatch copies the hidden rows first). */
export type GpuMoeVariant = 'f32' | 'int4' | 'int8' | 'w8a8' | `${'f32' | 'int4' | 'int8' | 'w8a8'}:permute` | `${'int4' | 'int8'}:dq`;

/** Deterministic bytes in 64 MiB chunks: f32 values in [-amp, amp], or random codes for the integer types. */
export function fillDeterministic(m: GpuMemory, t: DataType, amp: number, seed: number): void {
  const bytes = m.byteSizes[0];
  const chunk = new Uint8Array(Math.min(bytes, 64 << 20));
  let s = seed >>> 0;
  if (t === 'f32') {
    const f = new Float32Array(chunk.buffer, 0, chunk.length >> 2);
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
export function variantConfig(v: GpuMoeVariant): { wdt: DataType; cfg: Partial<moe.layer.LayerConfig>; scales: (dims: readonly number[]) => number[] | undefined } {
  if (v.endsWith(':permute')) {
    const base = variantConfig(v.slice(0, -':permute'.length) as GpuMoeVariant);
    return { ...base, cfg: { ...base.cfg, gemm1: 'permute' } };
  }
  // dynamic int8 activations (rfcs/0006) on the weight-only weights: the rows quantized on the device first
  if (v.endsWith(':dq')) {
    const base = variantConfig(v.slice(0, -':dq'.length) as GpuMoeVariant);
    return { ...base, cfg: { ...base.cfg, dynamicQuantization: 's8' } };
  }
  const blocks = (d: readonly number[]): number[] => [d[0], d[1] / 32, d[2]];
  if (v === 'int4') return { wdt: dt.s4, cfg: { weightScales: { w13: { mask: 7, groups: [1, 32, 1] }, w2: { mask: 7, groups: [1, 32, 1] } } }, scales: blocks };
  if (v === 'int8') return { wdt: dt.s8, cfg: { weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } }, scales: (d) => [d[0], d[2]] };
  if (v === 'w8a8') return { wdt: dt.s8, cfg: { quant: 'w8a8_dynamic', weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } }, scales: (d) => [d[0], d[2]] };
  return { wdt: dt.f32, cfg: {}, scales: () => undefined };
}

/** The MoE layer pd of a workload and variant (weights plain abc, renormalized top-k). */
export function layerPd(eng: GpuEngine, w: MoeWorkload, v: GpuMoeVariant): moe.layer.PrimitiveDesc<GpuEngine> {
  const { wdt, cfg } = variantConfig(v);
  return new moe.layer.PrimitiveDesc(eng, {
    tokens: w.T, hidden: w.K, intermediate: w.I, experts: w.E, topK: w.k, routing: { renormalize: true },
    weights: { w13: memory.desc([w.E, w.K, 2 * w.I], wdt, tag.abc), w2: memory.desc([w.E, w.I, w.K], wdt, tag.abc) }, ...cfg,
  });
}

/**
 * A layer's memories, filled deterministically: weights scaled so the activations stay O(1) through both
 * GEMMs, their scales (|code| <= 127 for int8, 8 for int4: |w| around 0.05), hidden states and logits.
 */
export function layerMemories(eng: GpuEngine, pd: moe.layer.PrimitiveDesc<GpuEngine>, w: MoeWorkload, v: GpuMoeVariant): { args: Record<number, GpuMemory>; out: GpuMemory; owned: GpuMemory[] } {
  const { wdt, scales } = variantConfig(v);
  const mem = (md: MemoryDesc | undefined): GpuMemory => Memory.create(md!, eng);
  const w13 = mem(pd.queryMd('w13')), w2 = mem(pd.queryMd('w2'));
  fillDeterministic(w13, wdt, 0.05, 103);
  fillDeterministic(w2, wdt, 0.05, 104);
  const hidden = mem(pd.queryMd('hidden')), logits = mem(pd.queryMd('logits')), out = mem(pd.queryMd('dst'));
  fillDeterministic(hidden, dt.f32, 1, 101);
  fillDeterministic(logits, dt.f32, 4, 102);
  const args: Record<number, GpuMemory> = { [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: out };
  const owned = [w13, w2, hidden, logits, out];
  for (const [id, dims] of [[ARG.WEIGHTS, [w.E, w.K, 2 * w.I]], [ARG.WEIGHTS_1, [w.E, w.I, w.K]]] as const) {
    const sd = scales(dims);
    if (!sd) continue;
    const s = mem(memory.desc(sd, dt.f32, sd.length === 3 ? tag.abc : tag.ab));
    s.write(new Float32Array(sd.reduce((a, b) => a * b, 1)).fill(wdt === dt.s4 ? 0.05 / 8 : 0.05 / 128));
    args[ARG.ATTR_SCALES | id] = s;
    owned.push(s);
  }
  return { args, out, owned };
}

/** Routed rows per expert of a top-k router over `T` tokens: distinct experts per token, deterministic (an LCG). */
export function routedSizes(T: number, E: number, topK: number): number[] {
  const sizes = new Array<number>(E).fill(0);
  let s = 12345;
  for (let t = 0; t < T; t++) {
    const chosen = new Set<number>();
    while (chosen.size < topK) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      chosen.add((s >>> 8) % E);
    }
    for (const e of chosen) sizes[e]++;
  }
  return sizes;
}

/**
 * Calls and host time of every Dawn method over `n` runs of `fn`, per run: the prototypes of the
 * device, queue, encoder, pass and buffer objects are wrapped for the duration.
 */
export async function countDawnCalls(eng: GpuEngine, n: number, fn: () => Promise<void>): Promise<{ method: string; calls: number; us: number }[]> {
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

/**
 * Dawn's one-dispatch floor as a function: each call records one tiny dispatch, submits it and awaits
 * `onSubmittedWorkDone` (issue 20's floor, outside the library).
 */
export function tinyDispatch(eng: GpuEngine): () => Promise<undefined> {
  const p = eng.pipeline('bench-floor', () => '@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3u) { b[i.x] = b[i.x] + 1u; }');
  const buf = eng.createBuffer(256, 'floor');
  const bg = eng.device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
  return () => {
    const enc = eng.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(p);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(1);
    pass.end();
    eng.device.queue.submit([enc.finish()]);
    return eng.device.queue.onSubmittedWorkDone();
  };
}

/**
 * The GPU's streaming read rate: a WGSL kernel that reads `bytes` once (vec4 loads, grid-stride, 8192
 * workgroups), wait included; median of `reps` after 3 warm-ups. Issue 20's bound reads touched bytes at it.
 */
export async function readRate(eng: GpuEngine, bytes: number, reps = 10): Promise<{ ms: number; gbs: number }> {
  const p = eng.pipeline('bench-read', () => `@group(0) @binding(0) var<storage, read> a: array<vec4f>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let n = arrayLength(&a); let stride = nw.x * 256u; var s = vec4f(0.0);
  for (var i = g.x; i < n; i += stride) { s += a[i]; }
  if (s.x == 1.2345e-30) { o[g.x] = s.y; }
}`);
  const a = eng.createBuffer(bytes, 'read src'), o = eng.createBuffer(4 * 256 * 8192, 'read out');
  const bg = eng.device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: a } }, { binding: 1, resource: { buffer: o } }] });
  const t: number[] = [];
  for (let i = 0; i < reps + 3; i++) {
    const t0 = performance.now();
    const enc = eng.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(p);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(8192);
    pass.end();
    eng.device.queue.submit([enc.finish()]);
    await eng.device.queue.onSubmittedWorkDone();
    if (i >= 3) t.push(performance.now() - t0);
  }
  a.destroy();
  o.destroy();
  t.sort((x, y) => x - y);
  const ms = t.length % 2 ? t[(t.length - 1) / 2] : (t[t.length / 2 - 1] + t[t.length / 2]) / 2;
  return { ms, gbs: bytes / ms / 1e6 };
}
