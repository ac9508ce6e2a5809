/**
 * Decode-latency probe (issues 20 / 21): the same MoE layer and grouped matmul built under several
 * kernel choices, timed execution by execution interleaved (A, B, C, ... A, B, C, ...) in one process,
 * after the GPU was kept busy (sustained clocks, gpu_clock_warmup.ts). Choices:
 *   sched: the grouped-schedule dispatch before gemv-splitk, the routing check pass, K splits from the
 *          K iterations per thread alone;
 *   inlold: the schedule inside gemv-splitk, routing checked in its route kernel, those K splits;
 *   old: gemv-splitk as before session 10 (GEMV_PREVIOUS_TUNING: 4 rows per tile, 32 / 16 lanes, 4 loads
 *        in flight, K splits for a grid of ~512 workgroups with 4-bit weights);
 *   new: the defaults;
 *   t256 / t1024: new aiming at 256 / 1024 workgroups; kg1 / kg2 / kg4: new with K splits forced;
 *   a spec over the defaults (choiceOf: L lanes, U loads in flight, K splits, R rows, H block scales,
 *   A aligned K, T target workgroups; a leading O starts from `old`), e.g. L16U8R1.
 *   --workloads=decode-1,decode-4,decode-8,qwen3-decode-1 --variants=int4,f32,int8 --tokens=1,4,8 --reps=30
 *   --choices=old,new,L8,R4 --spin-ms=1500 --gemm=true --types=f32,u4,s8 --gemm-shape=64,2048,2816
 * Layer rows: wall (execute + wait) median per choice, GPU pass time (timestamp queries), the impl names.
 * GEMM rows (the grouped matmul P#1 alone, gemmRows): floors three ways, then per choice the wall split
 * into host recording (execute) and wait, GPU time per pass, Dawn calls at the first token count,
 * beside issue 20's bound. Run node with --expose-gc (a collection before each row). Writes JSON to
 * $OUT/gpu_decode_probe.json when OUT is set.
 */
import { writeFileSync } from 'node:fs';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, offsets, tag, type DataType, type GpuEngine, type GpuMemory } from '../src/index.js';
import { GEMV_PREVIOUS_TUNING, gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { gpuRoutingTuning } from '../src/primitives/moe/routing/webgpu_routing.js';
import { countDawnCalls, layerMemories, layerPd, readRate, routedSizes, type GpuMoeVariant } from './gpu_bench_common.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';
import { gpuMoeWorkload } from './gpu_moe_bench.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const REPS = Number(arg('reps', '30'));
const SPIN_MS = Number(arg('spin-ms', '1500'));

interface Choice { readonly name: string; readonly kernel: Partial<typeof gpuKernelTuning>; readonly checked: boolean }
const GEMV_PREVIOUS = GEMV_PREVIOUS_TUNING;
const CHOICES: Record<string, Choice> = {
  sched: { name: 'sched', kernel: { ...GEMV_PREVIOUS, gemvInline: false, gemvTargetWorkgroups: Infinity }, checked: false },
  inlold: { name: 'inlold', kernel: { ...GEMV_PREVIOUS, gemvTargetWorkgroups: Infinity }, checked: true },
  old: { name: 'old', kernel: GEMV_PREVIOUS, checked: true },
  new: { name: 'new', kernel: {}, checked: true },
  t256: { name: 't256', kernel: { gemvTargetWorkgroups: 256 }, checked: true },
  t1024: { name: 't1024', kernel: { gemvTargetWorkgroups: 1024 }, checked: true },
  kg1: { name: 'kg1', kernel: { gemvKSplit: 1 }, checked: true },
  kg2: { name: 'kg2', kernel: { gemvKSplit: 2 }, checked: true },
  kg4: { name: 'kg4', kernel: { gemvKSplit: 4 }, checked: true },
};

/**
 * A choice by name, or a spec over the current defaults (letters then numbers, in any order): L lanes,
 * U unroll, K K splits, R rows per tile, H block scales (0 / 1), A aligned K slices (0 / 1), W 4-bit small
 * grid (gemvSmallGrid), T target workgroups, O (the previous tuning first), e.g. `OL8U16K1H1A1`.
 */
function choiceOf(spec: string): Choice {
  if (CHOICES[spec]) return CHOICES[spec];
  const kernel: Partial<typeof gpuKernelTuning> = spec.startsWith('O') ? { ...GEMV_PREVIOUS } : {};
  for (const [, key, v] of (spec.startsWith('O') ? spec.slice(1) : spec).matchAll(/([A-Z])(\d+)/g)) {
    const n = Number(v);
    switch (key) {
      case 'L': kernel.gemvLanes = n; break;
      case 'U': kernel.gemvUnroll = n; break;
      case 'K': kernel.gemvKSplit = n; break;
      case 'R': kernel.gemvRows = n; break;
      case 'H': kernel.gemvBlockScale = n === 1; break;
      case 'A': kernel.gemvAlignK = n === 1; break;
      case 'W': kernel.gemvSmallGrid = n; break;
      case 'T': kernel.gemvTargetWorkgroups = n; break;
      default: throw new Error(`gpu_decode_probe: unknown choice letter ${key} in ${spec}`);
    }
  }
  return { name: spec, kernel, checked: true };
}

function under<T>(c: Choice, make: () => T): T {
  const saved = { ...gpuKernelTuning }, checked = gpuRoutingTuning.checked;
  Object.assign(gpuKernelTuning, c.kernel);
  gpuRoutingTuning.checked = c.checked;
  try {
    return make();
  } finally {
    Object.assign(gpuKernelTuning, saved);
    gpuRoutingTuning.checked = checked;
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Medians of the functions timed interleaved, after `warmup` rounds. */
async function interleaved(fns: readonly (() => Promise<void>)[], reps = REPS, warmup = 10): Promise<number[]> {
  for (let i = 0; i < warmup; i++) for (const f of fns) await f();
  const t = fns.map(() => [] as number[]);
  for (let i = 0; i < reps; i++) {
    for (let j = 0; j < fns.length; j++) {
      const t0 = performance.now();
      await fns[j]();
      t[j].push(performance.now() - t0);
    }
  }
  return t.map(median);
}

function fill(m: GpuMemory, bytes: number): void {
  const chunk = new Float32Array(Math.min(bytes, 64 << 20) / 4);
  for (let i = 0; i < chunk.length; i++) chunk[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
  const b = new Uint8Array(chunk.buffer);
  for (let off = 0; off < bytes; off += b.length) m.writeBytes(b.subarray(0, Math.min(b.length, bytes - off)), 0, off);
}

/** Medians of execute (host recording), wait and their sum per function, timed interleaved after `warmup` rounds. */
async function interleavedSplit(fns: readonly { exec: () => void; wait: () => Promise<void> }[], reps = REPS, warmup = 10): Promise<{ wall: number; exec: number; wait: number }[]> {
  for (let i = 0; i < warmup; i++) for (const f of fns) { f.exec(); await f.wait(); }
  const t = fns.map(() => ({ wall: [] as number[], exec: [] as number[], wait: [] as number[] }));
  for (let i = 0; i < reps; i++) {
    for (let j = 0; j < fns.length; j++) {
      const t0 = performance.now();
      fns[j].exec();
      const t1 = performance.now();
      await fns[j].wait();
      const t2 = performance.now();
      t[j].wall.push(t2 - t0);
      t[j].exec.push(t1 - t0);
      t[j].wait.push(t2 - t1);
    }
  }
  return t.map((x) => ({ wall: median(x.wall), exec: median(x.exec), wait: median(x.wait) }));
}

/** Median GPU time per pass label (and of their sum) over `runs` executions, from the timestamp queries. */
async function passTimes(eng: GpuEngine, runs: number, run: () => Promise<void>): Promise<{ total: number; byLabel: Record<string, number> }> {
  if (!eng.caps.timestampQuery) return { total: NaN, byLabel: {} };
  eng.setProfiling(true);
  const totals: number[] = [];
  const by = new Map<string, number[]>();
  try {
    for (let r = 0; r < runs; r++) {
      await run();
      const prof = eng.takeProfile();
      totals.push(prof.reduce((a, x) => a + x.ms, 0));
      const sums = new Map<string, number>();
      for (const x of prof) sums.set(x.label, (sums.get(x.label) ?? 0) + x.ms);
      for (const [l, v] of sums) (by.get(l) ?? by.set(l, []).get(l)!).push(v);
    }
  } finally {
    eng.setProfiling(false);
  }
  return { total: median(totals), byLabel: Object.fromEntries([...by].map(([l, v]) => [l, median(v)])) };
}

/**
 * One tiny dispatch + wait three ways, interleaved: raw Dawn with onSubmittedWorkDone (gpu_bench's
 * floor), raw Dawn with a 16-byte mapped read-back instead, and through the engine (a status slot,
 * stream.wait: its error scope, read-back and map); and the GPU time of that dispatch.
 */
async function floors(eng: GpuEngine, strm: Stream): Promise<Record<string, number>> {
  const p = eng.pipeline('probe-floor', () => '@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3u) { if (b[0] == 0xdeadbeefu) { b[1] = i.x; } }');
  const buf = eng.createBuffer(256, 'probe floor');
  const read = eng.device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const bg = eng.device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf, size: 16 } }] });
  const raw = (map: boolean) => async (): Promise<void> => {
    const enc = eng.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(p);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(1);
    pass.end();
    if (map) enc.copyBufferToBuffer(buf, 0, read, 0, 16);
    eng.device.queue.submit([enc.finish()]);
    if (!map) return eng.device.queue.onSubmittedWorkDone();
    await read.mapAsync(GPUMapMode.READ);
    read.getMappedRange();
    read.unmap();
  };
  const engine = async (): Promise<void> => {
    const slot = eng.status.take(() => undefined);
    eng.computePass('probe.floor', (pass) => {
      pass.setPipeline(p);
      pass.setBindGroup(0, eng.bindGroup(p, [{ binding: 0, resource: slot.binding }]));
      pass.dispatchWorkgroups(1);
    });
    await strm.wait();
  };
  const engineRecord = (): void => {
    const slot = eng.status.take(() => undefined);
    eng.computePass('probe.floor', (pass) => {
      pass.setPipeline(p);
      pass.setBindGroup(0, eng.bindGroup(p, [{ binding: 0, resource: slot.binding }]));
      pass.dispatchWorkgroups(1);
    });
  };
  await keepGpuBusy(eng, SPIN_MS);
  const [rawDone, rawMap, eng1] = await interleaved([raw(false), raw(true), engine], 50);
  const [split] = await interleavedSplit([{ exec: engineRecord, wait: () => strm.wait() }], 50);
  const gpu = await passTimes(eng, 10, engine);
  read.destroy();
  buf.destroy();
  return { rawDone, rawMap, engine: eng1, engineExec: split.exec, engineWait: split.wait, gpu: gpu.total };
}

/**
 * The grouped matmul P#1 alone (MoE-B: E = 64, top-6, K = 2048, N = 2816) for f32 / u4 and s4 K-block 32 / s8
 * per column at the --tokens counts, under each choice: wall (execute + wait) split into the host's
 * recording (execute) and the wait (submit, GPU, map of the status read-back), the GPU time per pass
 * (timestamps: main, split-K reduce), Dawn calls per execution at the first token count; beside the
 * floors and issue 20's bound (raw floor + 2x the read of the touched bytes at the read kernel's rate).
 */
async function gemmRows(eng: GpuEngine, strm: Stream, choices: readonly Choice[], out: Record<string, unknown>[]): Promise<void> {
  const fl = await floors(eng, strm);
  await keepGpuBusy(eng, SPIN_MS);
  const gbs = (await readRate(eng, Number(arg('read-mib', '512')) << 20)).gbs;
  console.log(`floor (1 dispatch + wait): raw onSubmittedWorkDone ${(fl.rawDone * 1000).toFixed(1)} us, raw map read-back ${(fl.rawMap * 1000).toFixed(1)} us, engine (status slot, stream.wait) ${(fl.engine * 1000).toFixed(1)} us (record ${(fl.engineExec * 1000).toFixed(1)} + wait ${(fl.engineWait * 1000).toFixed(1)}); its GPU pass ${(fl.gpu * 1000).toFixed(1)} us; read kernel ${gbs.toFixed(0)} GB/s`);
  out.push({ kind: 'floors', ...fl, readGBs: gbs });
  // --gemm-shape=E,K,N: a small shape for a smoke run on SwiftShader.
  const [E, K, N] = arg('gemm-shape', '64,2048,2816').split(',').map(Number), TOPK = 6;
  const all: { name: string; wei: DataType; mask: number; groups: number[] }[] = [
    { name: 'f32', wei: 'f32', mask: 0, groups: [] },
    { name: 'u4 (K-block 32)', wei: 'u4', mask: 7, groups: [1, 32, 1] },
    { name: 's4 (K-block 32)', wei: 's4', mask: 7, groups: [1, 32, 1] },
    { name: 's8 (per column)', wei: 's8', mask: 5, groups: [] },
  ];
  const types = all.filter((t) => arg('types', 'f32,u4,s8').split(',').includes(t.wei));
  for (const q of types) {
    const wq = Memory.create(memory.desc([E, K, N], q.wei, tag.abc), eng);
    fill(wq, wq.desc.getSize());
    const attr = new PrimitiveAttr();
    if (q.mask) attr.setScales(ARG.WEIGHTS, q.mask, q.groups, dt.f32);
    let sc: GpuMemory | undefined;
    let first = true;
    for (const T of arg('tokens', '1,4,8').split(',').map(Number)) {
      const sizes = routedSizes(T, E, TOPK), M = T * TOPK;
      const srcMd = memory.desc.grouped([M, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
      const dstMd = memory.desc.grouped([M, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
      const pds = choices.map((c) => under(c, () => { const pd = new matmul.PrimitiveDesc(eng, srcMd, wq.desc, dstMd, attr); return { pd, prim: new matmul.Primitive(pd), impl: pd.implInfo }; }));
      if (q.mask && !sc) { sc = Memory.create(pds[0].pd.queryMd('scales:weights')!, eng); fill(sc, sc.desc.getSize()); }
      const src = Memory.create(srcMd, eng);
      fill(src, M * K * 4);
      src.writeOffsets(offsets.fromSizes(sizes));
      const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wq, [ARG.DST]: dst };
      if (sc) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = sc;
      const touched = sizes.filter((x) => x > 0).length;
      const bytes = touched * (wq.desc.getSize() + (sc?.desc.getSize() ?? 0)) / E;
      const bound = fl.rawDone + 2 * bytes / (gbs * 1e6);
      const fns = pds.map((x) => ({ exec: () => x.prim.execute(strm, args), wait: () => strm.wait() }));
      // node --expose-gc: no collection of the previous row's garbage inside the timed loop.
      (globalThis as { gc?: () => void }).gc?.();
      await keepGpuBusy(eng, SPIN_MS);
      const split = await interleavedSplit(fns);
      const gpu: { total: number; byLabel: Record<string, number> }[] = [];
      for (const f of fns) gpu.push(await passTimes(eng, 10, async () => { f.exec(); await f.wait(); }));
      const calls: string[] = [];
      if (first) {
        for (const f of fns) {
          const c = await countDawnCalls(eng, 20, async () => { f.exec(); await f.wait(); });
          calls.push(`${c.reduce((a, x) => a + x.calls, 0).toFixed(0)} calls ${c.reduce((a, x) => a + x.us, 0).toFixed(0)} us (${c.slice(0, 6).map((x) => `${x.method} ${x.us.toFixed(0)}`).join(', ')})`);
        }
      }
      const row = {
        kind: 'gemm', weights: q.name, T, touchedBytes: bytes, idealMs: bytes / (gbs * 1e6), boundMs: bound,
        choices: choices.map((c, i) => ({ choice: c.name, ...split[i], gpuMs: gpu[i].total, passes: gpu[i].byLabel, impl: pds[i].impl, dawn: calls[i] })),
      };
      out.push(row);
      console.log(`gemm ${q.name} T=${T}: touched ${(bytes / 1e6).toFixed(1)} MB (one read ${(row.idealMs * 1000).toFixed(1)} us), bound ${bound.toFixed(3)} ms`);
      for (const c of row.choices) {
        console.log(`  ${c.choice.padEnd(16)} wall ${c.wall.toFixed(3)} = exec ${c.exec.toFixed(3)} + wait ${c.wait.toFixed(3)} ms; GPU ${(c.gpuMs * 1000).toFixed(1)} us [${Object.entries(c.passes).map(([l, v]) => `${l} ${(v * 1000).toFixed(1)}`).join(' + ')}] ${c.impl.replace('webgpu:', '')}${c.dawn ? `\n      Dawn: ${c.dawn}` : ''}`);
      }
      first = false;
      for (const x of pds) x.prim.destroy();
      src.free();
      dst.free();
    }
    wq.free();
    sc?.free();
  }
}

async function main(): Promise<void> {
  const eng: GpuEngine = await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' });
  console.log(`gpu: ${eng.adapterInfo}; node ${process.version}; maxStorageBuffersPerShaderStage ${eng.device.limits.maxStorageBuffersPerShaderStage}`);
  const choices = arg('choices', 'sched,inlold,new,t256,t1024').split(',').map(choiceOf);
  const strm = new Stream(eng);
  const out: Record<string, unknown>[] = [];
  for (const wname of arg('workloads', 'decode-1,decode-4,decode-8,qwen3-decode-1').split(',').filter((s) => s)) {
    const w = gpuMoeWorkload(wname);
    for (const v of arg('variants', 'int4,f32,int8').split(',').filter((s) => s) as GpuMoeVariant[]) {
      const layers = choices.map((c) => under(c, () => new moe.layer.Primitive(layerPd(eng, w, v))));
      // implInfo is derived when read: read it under the same choice.
      const impls = choices.map((c, i) => under(c, () => layers[i].pd.implInfo));
      const { args, owned } = layerMemories(eng, layers[0].pd, w, v);
      await keepGpuBusy(eng, SPIN_MS);
      const wall = await interleaved(layers.map((l) => async () => { l.execute(strm, args); await strm.wait(); }));
      // GPU time per pass (in recording order), the choices' runs interleaved: the same clocks for each.
      const gpu: number[] = [];
      const passes: number[][] = [];
      if (eng.caps.timestampQuery) {
        const runs = layers.map(() => [] as { label: string; ms: number }[][]);
        eng.setProfiling(true);
        try {
          for (let r = 0; r < 20; r++) {
            for (const [i, l] of layers.entries()) {
              l.execute(strm, args);
              await strm.wait();
              runs[i].push(eng.takeProfile());
            }
          }
        } finally {
          eng.setProfiling(false);
        }
        for (const rs of runs) {
          gpu.push(median(rs.map((x) => x.reduce((a, y) => a + y.ms, 0))));
          passes.push(rs[0].map((_, j) => median(rs.map((x) => x[j]?.ms ?? 0))));
        }
      }
      const row = { kind: 'layer', workload: w.name, variant: v, choices: choices.map((c, i) => ({ choice: c.name, wallMs: wall[i], gpuMs: gpu[i], passesUs: passes[i]?.map((x) => x * 1000), impl: impls[i] })) };
      out.push(row);
      console.log(`layer ${w.name} ${v}: ${row.choices.map((c) => `${c.choice} ${c.wallMs.toFixed(3)} ms (GPU ${c.gpuMs?.toFixed(3) ?? '-'} = ${c.passesUs?.map((x) => x.toFixed(1)).join(' + ') ?? '-'} us)`).join(', ')}`);
      console.log(`  impls: ${row.choices.map((c) => `${c.choice}: ${c.impl.replace(/.*matmul\(/, '').slice(0, 160)}`).join(' | ')}`);
      for (const l of layers) l.destroy();
      for (const m of owned) m.free();
    }
  }
  if (arg('gemm', 'true') === 'true') await gemmRows(eng, strm, choices, out);
  if (process.env.OUT) writeFileSync(`${process.env.OUT}/gpu_decode_probe.json`, JSON.stringify({ adapter: eng.adapterInfo, rows: out }, null, 2));
  eng.release();
}

await main();
