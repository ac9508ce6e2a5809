/**
 * A / B of gemm-tiled's staging and tiles in the MoE layer, in one process and interleaved run by run
 * (the device machine's clocks wander within a process too: every tuning sees the same conditions):
 * per workload and weight variant, one set of weights, one layer per tuning (the benchmark-only
 * switches are read when a primitive is created), then `--reps` rounds of one execute + wait of each
 * layer with timestamp queries. Prints the median GPU time of each pass per tuning; the routing pass
 * (no tuning touches it) tells the clock state.
 *
 *   --workloads=moe-b,moe-b-4096   --variants=f32,int4,int8   --tunings=base,pf,pf+ch,pf+ch+tn128   --reps=30
 *
 * Tunings ('+'-joined): base (loop staging, one element per load: the kernel before this work), pf
 * (register prefetch), ch (chunked weights loads), tn64 / tn128 (tile columns), bk32 (K slice 32),
 * sk (K-block weights scales held in registers, known at creation: gpuKernelTuning.staticKBlocks),
 * mg (integer codes to f32 by the 2^23 mantissa trick), nd (no decode at all: wrong results, times the
 * rest of the staging), dk16 / dk32 / dk64 (gemm-tiled-dot4's K slice: gpuKernelTuning.dot4Bk; default 64 for tiles of up to 32 rows, 16 above), v4 (f32
 * GEMMs on gemm-tiled-vec4, row modes and GLU included; without it they run gemm-tiled, as before
 * session 10), sr (vec4: threads past the tile's last row skip the products: vec4Tuning.skipRows; nsr:
 * force it off), bt64 / bt128 (vec4: 64- / 128-row tiles where groups average more than 64 rows), vbk8 / vbk12 / vbk16
 * (vec4's K slice for every tile), r8 / r4 / r2 (vec4: 8, 4 or 2 rows per thread in 32- and 64-row tiles), rf /
 * nrf (vec4: rows-fast A loads on / off), vnp (vec4: no register prefetch), xa / xb (vec4: A rows / B
 * columns worked out in every slice instead of once: vec4Tuning.hoistA / hoistB; ha / hb: once). The library's
 * default is pf+ch+sk+v4.
 * Variants: f32, int4 (s4, K-block 32 scales), int4c (s4, per-column scales), int8 (s8, per-column scales),
 * w8a8 (dynamic s8 activations x s8 weights: gemm-tiled-dot4).
 * Before each variant's timed rounds the GPU is kept busy 1.5 s (`--spin-ms`, bench/gpu_clock_warmup.ts),
 * and 50 ms before each round, so every tuning runs at the sustained clock.
 */
import { Engine, Stream, dt, memory, moe, tag, type GpuEngine } from '../src/index.js';
import { gemmThreadTuning } from '../src/kernels/wgsl/gemm_threads.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { vec4Tuning } from '../src/kernels/wgsl/gemm_tiled_vec4.js';
import { MOE_WORKLOADS, type MoeWorkload } from './moe_workloads.js';
import { layerMemories, layerPd } from './gpu_bench_common.js';
import { keepGpuBusy } from './gpu_clock_warmup.js';

const cli = new Map<string, string>();
for (const a of process.argv.slice(2)) {
  const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
  if (m) cli.set(m[1], m[2] ?? 'true');
}
const WORKLOADS: Record<string, MoeWorkload> = { ...MOE_WORKLOADS, 'moe-b-4096': { ...MOE_WORKLOADS['moe-b'], name: 'moe-b-4096', T: 4096, description: 'MoE-B at T=4096' },
  'qwen3-prefill-256': { name: 'qwen3-prefill-256', T: 256, E: 128, k: 8, K: 2048, I: 768, description: 'Qwen3-30B-A3B MoE layer, T=256' },
  // A smoke test on a CPU WebGPU (no timestamps there: outputs compared only).
  tiny: { name: 'tiny', T: 64, E: 4, k: 2, K: 64, I: 64, description: 'smoke test' },
};

function tune(t: string): void {
  const parts = new Set(t.split('+'));
  gemmThreadTuning.prefetch = parts.has('pf');
  gpuKernelTuning.chunk = parts.has('ch');
  gpuKernelTuning.tiledTn = parts.has('tn128') ? 128 : parts.has('tn64') ? 64 : undefined;
  gpuKernelTuning.tiledBk = parts.has('bk32') ? 32 : undefined;
  gpuKernelTuning.staticKBlocks = parts.has('sk');
  gemmThreadTuning.magicDecode = parts.has('mg');
  gemmThreadTuning.skipDecode = parts.has('nd');
  gpuKernelTuning.dot4Bk = parts.has('dk64') ? 64 : parts.has('dk32') ? 32 : parts.has('dk16') ? 16 : undefined;
  gpuKernelTuning.vec4 = parts.has('v4');
  vec4Tuning.skipRows = parts.has('sr') ? true : parts.has('nsr') ? false : undefined;
  vec4Tuning.bigTile = parts.has('bt64') ? 64 : parts.has('bt128') ? 128 : undefined;
  const vbk = [...parts].find((x) => /^vbk\d+$/.test(x));
  vec4Tuning.bk = vbk ? Number(vbk.slice(3)) : undefined;
  vec4Tuning.smallRowsPerThread = parts.has('r4') ? 4 : parts.has('r8') ? 8 : parts.has('r2') ? 0 : undefined;
  vec4Tuning.aRowsFast = parts.has('rf') ? true : parts.has('nrf') ? false : undefined;
  vec4Tuning.prefetch = parts.has('vnp') ? false : undefined;
  vec4Tuning.hoistA = parts.has('xa') ? false : parts.has('ha') ? true : undefined;
  vec4Tuning.hoistB = parts.has('xb') ? false : parts.has('hb') ? true : undefined;
}

type Variant = 'f32' | 'int4' | 'int4c' | 'int8' | 'w8a8';

/** int4c: s4 weights with per-column (K-constant) scales, to separate the K-block scales' cost from the nibbles'. */
function variantPd(eng: GpuEngine, w: MoeWorkload, v: Variant): moe.layer.PrimitiveDesc<GpuEngine> {
  if (v !== 'int4c') return layerPd(eng, w, v);
  return new moe.layer.PrimitiveDesc(eng, {
    tokens: w.T, hidden: w.K, intermediate: w.I, experts: w.E, topK: w.k, routing: { renormalize: true },
    weights: { w13: memory.desc([w.E, w.K, 2 * w.I], dt.s4, tag.abc), w2: memory.desc([w.E, w.I, w.K], dt.s4, tag.abc) },
    weightScales: { w13: { mask: 5 }, w2: { mask: 5 } },
  });
}

const med = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };

async function compare(eng: GpuEngine, w: MoeWorkload, v: Variant, tunings: string[], reps: number): Promise<void> {
  const strm = new Stream(eng);
  const layers = tunings.map((t) => {
    tune(t);
    const pd = variantPd(eng, w, v);
    return { t, pd, layer: new moe.layer.Primitive(pd), passes: new Map<string, number[]>() };
  });
  tune('pf+ch+sk+v4');
  // int4c's memories: int8's fill (random bytes) and per-column scale shapes fit s4 weights too.
  const { args, out, owned } = layerMemories(eng, layers[0].pd, w, v === 'int4c' ? 'int8' : v);
  // The tunings must agree (same weights, same routing): compare outputs with the first.
  let ref: Float32Array | undefined;
  const outElems = out.byteSizes[0] / 4;
  for (const l of layers) {
    // A layer that did not run must not pass as bit-identical: out starts as a sentinel each time.
    out.write(new Float32Array(outElems).fill(12345));
    for (let i = 0; i < 5; i++) { l.layer.execute(strm, args); await strm.wait(); }
    const o = Float32Array.from(await out.read());
    if (!ref) ref = o;
    else {
      let maxd = 0, maxv = 0;
      for (let i = 0; i < o.length; i++) { maxd = Math.max(maxd, Math.abs(o[i] - ref[i])); maxv = Math.max(maxv, Math.abs(ref[i])); }
      console.log(`  [${l.t}] vs [${layers[0].t}]: max |diff| ${maxd.toExponential(2)} (max |out| ${maxv.toExponential(2)})`);
    }
  }
  if (!eng.caps.timestampQuery) {
    for (const l of layers) l.layer.destroy();
    for (const m of owned) m.free();
    return;
  }
  await keepGpuBusy(eng, spinMs);
  eng.setProfiling(true);
  try {
    for (let r = 0; r < reps; r++) {
      await keepGpuBusy(eng, 50);
      for (const l of layers) {
        l.layer.execute(strm, args);
        await strm.wait();
        eng.takeProfile().forEach((p, j) => {
          const key = `${j}:${p.label}`;
          const xs = l.passes.get(key) ?? [];
          xs.push(p.ms * 1000);
          l.passes.set(key, xs);
        });
      }
    }
  } finally {
    eng.setProfiling(false);
  }
  for (const l of layers) {
    const parts = [...l.passes].map(([k, xs]) => `${k.split(':')[1]} ${med(xs).toFixed(0)}`);
    const total = [...l.passes.values()].reduce((a, xs) => a + med(xs), 0);
    console.log(`${w.name} ${v} [${l.t}] ${l.layer.stages.filter((s) => /matmul|gemm/.test(s.name)).map((s) => s.implInfo).join(' ; ')}: GPU ${total.toFixed(0)} us = ${parts.join(' + ')} us (medians of ${reps})`);
    l.layer.destroy();
  }
  for (const m of owned) m.free();
}

const workloads = (cli.get('workloads') ?? 'moe-b').split(',');
const variants = (cli.get('variants') ?? 'f32,int4,int8').split(',') as Variant[];
const tunings = (cli.get('tunings') ?? 'base,pf,pf+ch,pf+ch+tn128').split(',');
const reps = Number(cli.get('reps') ?? 30);
const spinMs = Number(cli.get('spin-ms') ?? 1500);
const eng = await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' }) as GpuEngine;
console.log(`gpu: ${eng.adapterInfo}; node ${process.version}`);
try {
  for (const name of workloads) {
    const w = WORKLOADS[name];
    if (!w) throw new Error(`unknown workload ${name}`);
    for (const v of variants) await compare(eng, w, v, tunings, reps);
  }
} finally {
  eng.release();
}
