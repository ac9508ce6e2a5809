/**
 * Decode-latency probe (issues 20 / 21): the same MoE layer and grouped matmul built under several
 * kernel choices, timed execution by execution interleaved (A, B, C, ... A, B, C, ...) in one process,
 * after the GPU was kept busy (sustained clocks, gpu_clock_warmup.ts). Choices:
 *   sched: the grouped-schedule dispatch before gemv-splitk, the routing check pass, K splits from the
 *          K iterations per thread alone (the previous path);
 *   inlold: the schedule inside gemv-splitk, routing checked in its route kernel, the previous K splits;
 *   new: the defaults (inline schedule, checked routing, K splits for a grid of ~512 workgroups);
 *   t256 / t1024: new aiming at 256 / 1024 workgroups;
 *   kg1 / kg2 / kg4: new with gemv-splitk's K splits forced (1: no reduce pass).
 *   --workloads=decode-1,decode-4,decode-8,qwen3-decode-1 --variants=int4,f32,int8 --tokens=1,4,8 --reps=30
 *   --choices=sched,new,kg1,kg2,kg4 --spin-ms=1500 --gemm=true
 * Prints one line per row: wall (execute + wait) median per choice, GPU pass time (timestamp queries) for
 * the layer, the impl names; writes JSON to $OUT/gpu_decode_probe.json when OUT is set.
 */
import { writeFileSync } from 'node:fs';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, offsets, tag, type DataType, type GpuEngine, type GpuMemory } from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { gpuRoutingTuning } from '../src/primitives/moe/routing/webgpu_routing.js';
import { layerMemories, layerPd, routedSizes, type GpuMoeVariant } from './gpu_bench_common.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';
import { gpuMoeWorkload } from './gpu_moe_bench.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const REPS = Number(arg('reps', '30'));
const SPIN_MS = Number(arg('spin-ms', '1500'));

interface Choice { readonly name: string; readonly kernel: Partial<typeof gpuKernelTuning>; readonly checked: boolean }
const CHOICES: Record<string, Choice> = {
  sched: { name: 'sched', kernel: { gemvInline: false, gemvTargetWorkgroups: Infinity }, checked: false },
  inlold: { name: 'inlold', kernel: { gemvTargetWorkgroups: Infinity }, checked: true },
  new: { name: 'new', kernel: {}, checked: true },
  t256: { name: 't256', kernel: { gemvTargetWorkgroups: 256 }, checked: true },
  t1024: { name: 't1024', kernel: { gemvTargetWorkgroups: 1024 }, checked: true },
  kg1: { name: 'kg1', kernel: { gemvKSplit: 1 }, checked: true },
  kg2: { name: 'kg2', kernel: { gemvKSplit: 2 }, checked: true },
  kg4: { name: 'kg4', kernel: { gemvKSplit: 4 }, checked: true },
};

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

async function main(): Promise<void> {
  const eng: GpuEngine = await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' });
  console.log(`gpu: ${eng.adapterInfo}; node ${process.version}; maxStorageBuffersPerShaderStage ${eng.device.limits.maxStorageBuffersPerShaderStage}`);
  const choices = arg('choices', 'sched,inlold,new,t256,t1024').split(',').map((n) => CHOICES[n]);
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
      const gpu: number[] = [];
      if (eng.caps.timestampQuery) {
        for (const l of layers) {
          eng.setProfiling(true);
          const runs: number[] = [];
          try {
            for (let r = 0; r < 10; r++) {
              l.execute(strm, args);
              await strm.wait();
              runs.push(eng.takeProfile().reduce((a, x) => a + x.ms, 0));
            }
          } finally {
            eng.setProfiling(false);
          }
          gpu.push(median(runs));
        }
      }
      const row = { kind: 'layer', workload: w.name, variant: v, choices: choices.map((c, i) => ({ choice: c.name, wallMs: wall[i], gpuMs: gpu[i], impl: impls[i] })) };
      out.push(row);
      console.log(`layer ${w.name} ${v}: ${row.choices.map((c) => `${c.choice} ${c.wallMs.toFixed(3)} ms (GPU ${c.gpuMs?.toFixed(3) ?? '-'})`).join(', ')}`);
      console.log(`  impls: ${row.choices.map((c) => `${c.choice}: ${c.impl.replace(/.*matmul\(/, '').slice(0, 160)}`).join(' | ')}`);
      for (const l of layers) l.destroy();
      for (const m of owned) m.free();
    }
  }
  if (arg('gemm', 'true') === 'true') {
    const E = 64, TOPK = 6, K = 2048, N = 2816;
    const types: { name: string; wei: DataType; mask: number; groups: number[] }[] = [
      { name: 'f32', wei: 'f32', mask: 0, groups: [] },
      { name: 'u4 (K-block 32)', wei: 'u4', mask: 7, groups: [1, 32, 1] },
      { name: 's8 (per column)', wei: 's8', mask: 5, groups: [] },
    ];
    for (const q of types) {
      const wq = Memory.create(memory.desc([E, K, N], q.wei, tag.abc), eng);
      fill(wq, wq.desc.getSize());
      const attr = new PrimitiveAttr();
      if (q.mask) attr.setScales(ARG.WEIGHTS, q.mask, q.groups, dt.f32);
      let sc: GpuMemory | undefined;
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
        await keepGpuBusy(eng, SPIN_MS);
        const wall = await interleaved(pds.map((x) => async () => { x.prim.execute(strm, args); await strm.wait(); }));
        const row = { kind: 'gemm', weights: q.name, T, choices: choices.map((c, i) => ({ choice: c.name, wallMs: wall[i], impl: pds[i].impl })) };
        out.push(row);
        console.log(`gemm ${q.name} T=${T}: ${row.choices.map((c) => `${c.choice} ${c.wallMs.toFixed(3)} ms [${c.impl.replace('webgpu:', '')}]`).join(', ')}`);
        for (const x of pds) x.prim.destroy();
        src.free();
        dst.free();
      }
      wq.free();
      sc?.free();
    }
  }
  if (process.env.OUT) writeFileSync(`${process.env.OUT}/gpu_decode_probe.json`, JSON.stringify({ adapter: eng.adapterInfo, rows: out }, null, 2));
  eng.release();
}

await main();
