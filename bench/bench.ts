/**
 * benchdnn-style driver for groupdnn. Examples:
 *   npm run bench                                   # all built-in workloads, peak + ukernel + matmul
 *   npm run bench -- --mode=matmul --workload=moe-b --threads=1,2 --json
 *   npm run bench -- --grouped=0:4:100+0+28+384 512x1024:4x1024x2816 --dt=bf16
 *   npm run bench -- --peer=ort                     # add onnxruntime-web's per-expert MatMul loop
 *   npm run bench -- --mode=quant --threads=1 --min-ms=1500   # int8 and fused epilogue vs f32 (bench/quant_bench.ts)
 *   npm run bench -- --mode=weights --workload=decode,moe-b --threads=1 --variants=f32,w8,w4k32,mxfp4  # every weight format vs f32 packed, interleaved
 *   npm run bench -- --mode=weights --workload=decode --threads=1 --variants=f32,w4:dq --clock=cpu --relaxed-dot  # the :dq int4 kernels on the relaxed dot (Engine relaxedDot; Node 22+)
 *   npm run bench -- --mode=nbits --workload=decode,moe-b      # packed int4 vs onnxruntime-web MatMulNBits per expert, 1 thread (bench/ort_nbits_peer.ts)
 *   npm run bench -- --workload=moe-b --peer=ort --rounds=3    # alternate ours / peer 3 times; ratios from medians
 *   npm run bench -- --mode=moe --workload=moe-b,mixtral,decode-4 --threads=1,2 --rounds=3  # whole MoE layer vs onnxruntime-web MoE/QMoE
 *   npm run bench -- --mode=backward --threads=1,2 --rounds=9   # grouped matmul backward data / weights vs the forward (bench/backward_bench.ts)
 *   npm run bench -- --mode=dglu --threads=1,2 --rounds=3   # fused GLU-backward epilogue vs its GEMM (bench/glu_backward_bench.ts)
 *   npm run bench -- --mode=moe-backward --threads=1,2 --rounds=3   # MoE layer backward vs its forward (bench/moe_backward_bench.ts)
 *   npm run bench -- --mode=reorder --threads=1,2 --rounds=5   # packing into every packed layout vs a plain copy (bench/reorder_bench.ts)
 *   npm run bench -- --engine=gpu --mode=moe --workloads=decode-1,moe-b,qwen3-decode-1 --variants=f32,int4 --reps=10  # the MoE layer on the gpu engine, whole and per stage (bench/gpu_moe_bench.ts)
 * No mode here runs the RFC proposals side by side (the grouped matmuls are P#1's grouped memory descriptors):
 * that is `npm run compare` (bench/compare.ts), f32 and :dq (--formats=f32,w8:dq,w4:dq), P#3 grouped_gemm included.
 * Prints median/min/max ms and GFLOP/s of useful work (2 * sum(Mg) * K * N); --json prints one
 * object per line instead. Packed-weight runs alternate, sample by sample, with the bare microkernel
 * (row `ukernel~<workload>`): on a shared machine only ratios of samples taken together mean much.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt as DT, matmul, memory, reorder, tag, type DataType } from '../src/index.js';
import { fillRandom, timeIt, timePaired, timingOf, type Timing } from './timing.js';
import { WORKLOADS, usefulFlops, type Workload } from './workloads.js';
import { expertWeightBytes, pairedRatio, quantBench, quantRatios } from './quant_bench.js';
import { moeRoundChild, moeWorkloads, ortMoeRow, type MoeRow } from './moe_bench.js';
import { backwardChild, backwardWorkload, type BackwardRow } from './backward_bench.js';
import { dgluBench } from './glu_backward_bench.js';
import { JOB_DT_ALL } from '../src/kernels/job_layout.js';
import type { MoeBackwardRow } from './moe_backward_bench.js';
import { resolveIsa } from '../src/runtime/wasm_kernels.js';
import { reorderBench } from './reorder_bench.js';

interface Row {
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

const args = new Map<string, string>();
const positional: string[] = [];
for (const a of process.argv.slice(2)) {
  const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
  if (m) args.set(m[1], m[2] ?? 'true');
  else positional.push(a);
}
/** Every option this driver (and the gpu layer bench it hands --engine=gpu to) reads: anything else is a typo. */
const OPTIONS = ['mode', 'workload', 'workloads', 'threads', 'dt', 'weights', 'isa', 'min-ms', 'clock', 'relaxed-dot', 'peer', 'rounds', 'json',
  'grouped', 'variants', 'samples', 'layouts', 'glu', 'dglu-act', 'reorder-dims', 'ort', 'engine', 'reps', 'stages', 'dawn-calls', 'spin-ms', 'help'];
const MODES = ['all', 'peak', 'ukernel', 'matmul', 'quant', 'weights', 'nbits', 'moe', 'backward', 'moe-backward', 'dglu', 'reorder'];
if (args.has('help')) {
  // the usage is this file's header comment
  const src = readFileSync(fileURLToPath(import.meta.url), 'utf8');
  console.log(src.slice(src.indexOf('/**') + 4, src.indexOf('*/')).replace(/^ \* ?/gm, '').trimEnd());
  console.log(`\noptions: ${OPTIONS.map((o) => `--${o}`).join(' ')}\nmodes: ${MODES.join(' ')}`);
  process.exit(0);
}
for (const k of args.keys()) if (!OPTIONS.includes(k)) throw new Error(`bench: unknown option --${k} (--help lists them: ${OPTIONS.map((o) => `--${o}`).join(' ')})`);
const json = args.has('json');
const mode = args.get('mode') ?? 'all';
if (!MODES.includes(mode)) throw new Error(`bench: unknown --mode=${mode} (modes: ${MODES.join(', ')})`);
const dtArg = (args.get('dt') ?? 'f32') as DataType;
const threadList = (args.get('threads') ?? `1,${availableParallelism()}`).split(',').map(Number).filter((v, i, a) => a.indexOf(v) === i);
const weightForms = (args.get('weights') ?? 'packed,abc').split(',');
const isaList = (args.get('isa') ?? 'auto').split(',') as ('auto' | 'simd128' | 'relaxed')[];
const minMs = Number(args.get('min-ms') ?? 1500);
/** --clock=cpu (--mode=weights): time samples by process CPU time instead of wall time (a loaded, shared machine). */
const clock = args.get('clock') === 'cpu' ? 'cpu' : 'wall';
/** --relaxed-dot (--mode=weights): engines with `relaxedDot: true` (the :dq int4 kernels on relaxed SIMD's dot, where native). */
const relaxedDot = args.has('relaxed-dot');
const peers = (args.get('peer') ?? '').split(',').filter(Boolean);
const rounds = Math.max(1, Number(args.get('rounds') ?? 1));

function customWorkload(): Workload | undefined {
  const g = args.get('grouped');
  if (!g) return undefined;
  const m = /^(\d+):(\d+):([\d+]+)$/.exec(g);
  const p = /^(\d+)x(\d+):(\d+)x(\d+)x(\d+)$/.exec(positional[0] ?? '');
  if (!m || !p) throw new Error('usage: --grouped=0:G:s0+s1+... totalMxK:GxKxN');
  if (m[1] !== '0') throw new Error('--grouped: only variable dim 0 (rows) is benchmarked');
  const sizes = m[3].split('+').map(Number);
  const [totalM, K, G, K2, N] = p.slice(1).map(Number);
  if (sizes.length !== Number(m[2]) || G !== sizes.length) throw new Error(`--grouped: ${sizes.length} sizes for G = ${m[2]} / ${G}`);
  if (K !== K2) throw new Error('--grouped: K of src and weights differ');
  if (sizes.reduce((a, b) => a + b, 0) > totalM) throw new Error('--grouped: sizes exceed totalM');
  return { name: `custom:g${G}`, sizes, K, N, description: `${g} ${positional[0]}` };
}

const custom = mode === 'moe' || mode === 'reorder' || mode === 'backward' || mode === 'moe-backward' ? undefined : customWorkload();
const workloads: Workload[] = mode === 'moe' || mode === 'reorder' || mode === 'backward' || mode === 'moe-backward' ? [] : custom ? [custom] : (args.get('workload') ?? (mode === 'quant' || mode === 'weights' || mode === 'nbits' ? 'moe-b' : 'dense512,moe-a,moe-b,decode')).split(',').map((n) => {
  const w = WORKLOADS[n];
  if (!w) throw new Error(`unknown workload ${n}; built-in: ${Object.keys(WORKLOADS).join(', ')}`);
  return w;
});

const rows: Row[] = [];
/** The JavaScript runtime of this process: every row names it beside its kernel build. */
const RUNTIME = `node${process.versions.node}`;
/**
 * The kernel build a row ran (from its impl name: wasm:simd128:... / wasm:relaxed:... / moe.layer:simd128); '-'
 * for peers. (`moe.layer:w4:relaxed` names accumulation_mode relaxed, not the build.)
 */
function kernelBuild(impl: string): string {
  return /(?:wasm|moe\.layer):(simd128|relaxed)\b/.exec(impl)?.[1] ?? '-';
}

function report(r: Row): void {
  rows.push(r);
  const rt = `${RUNTIME}/${kernelBuild(r.impl)}`;
  if (json) console.log(JSON.stringify({ ...r, runtime: RUNTIME, kernels: kernelBuild(r.impl) }));
  else console.log(`${r.workload.padEnd(10)} ${r.impl.padEnd(34)} ${r.dt.padEnd(5)} ${String(r.threads).padStart(3)} ${r.median_ms.toFixed(3).padStart(10)} ${r.min_ms.toFixed(3).padStart(10)} ${r.max_ms.toFixed(3).padStart(10)} ${r.gflops.toFixed(2).padStart(9)}  ${rt.padEnd(20)}${r.note ? `  ${r.note}` : ''}`);
}
function row(workload: string, impl: string, dtName: string, threads: number, t: Timing, flops: number, note?: string): Row {
  return { workload, impl, dt: dtName, threads, median_ms: t.median, min_ms: t.min, max_ms: t.max, gflops: flops / t.median / 1e6, ...(note ? { note } : {}) };
}

/** Peak and ukernel samples are interleaved (same length, alternating), so both see the same interference. */
async function peakAndUkernel(isa: 'auto' | 'simd128' | 'relaxed'): Promise<void> {
  const eng = await Engine.create({ threads: 1, kernels: isa });
  const k = eng.kernels!;
  const iters = 2_000_000;
  const uk = ukernelSampler(eng, 10_000);
  const tp: number[] = [], tu: number[] = [], ti: number[] = [], tw8: number[] = [], tw4: number[] = [], td8: number[] = [], td4: number[] = [];
  const samplers: readonly (readonly [() => unknown, number[]])[] = [
    [() => k.peak_f32(iters, 1.0001), tp], [uk.sample, tu], [uk.sampleInt, ti], [uk.sampleW8, tw8], [uk.sampleW4, tw4],
    [uk.sampleDecode8, td8], [uk.sampleDecode4, td4],
  ];
  const t0 = performance.now();
  for (let i = 0; i < 3; i++) for (const [f] of samplers) f();
  while (tp.length < 15 || (performance.now() - t0 < 2 * minMs && tp.length < 400)) {
    for (const [f, t] of samplers) {
      const s = performance.now();
      f();
      t.push(performance.now() - s);
    }
  }
  const sp = timingOf(tp), su = timingOf(tu), si = timingOf(ti);
  const peakFlops = 96 * iters;
  report(row('peak', `wasm:${eng.isa}:f32x4-${eng.isa === 'relaxed' ? 'fma' : 'mul+add'}`, 'f32', 1, sp, peakFlops));
  report(row('ukernel', `wasm:${eng.isa}:f32-gemm-4x8 kc=${UK_KC}`, 'f32', 1, su, uk.flops, `best/best=${((uk.flops / su.min) / (peakFlops / sp.min)).toFixed(3)}`));
  report(row('ukernel', `wasm:${eng.isa}:s16-gemm-3x8 kc=${2 * UK_KC}`, 's16', 1, si, uk.intOps, `int ops; / f32 ukernel = ${((uk.intOps / si.median) / (uk.flops / su.median)).toFixed(3)}`));
  // The same integer kernel widening x8 / x4 code panels in registers (the 1-3 row tiles of W8A8 / W4A8).
  for (const [t, name, dtName] of [[tw8, 'w8', 's8'], [tw4, 'w4', 's4']] as const) {
    const tt = timingOf(t);
    report(row('ukernel', `wasm:${eng.isa}:s16-gemm-3x8-${name} kc=${2 * UK_KC}`, dtName, 1, tt, uk.intOps, `int ops; / int16 panels = ${(si.median / tt.median).toFixed(3)}`));
  }
  // The weight-only decode kernels (1 row x 2 panels, codes decoded in registers; issue 19): weights / s.
  for (const [t, name, dtName] of [[td8, 'f32-gemm-1x16w8', 's8'], [td4, 'f32-gemm-1x16w4', 's4']] as const) {
    const tt = timingOf(t);
    report(row('ukernel', `wasm:${eng.isa}:${name} kc=${UK_KC}`, dtName, 1, tt, uk.decodeFlops, `${(uk.decodeFlops / 2 / tt.median / 1e6).toFixed(2)} G weights/s (median; L1-resident)`));
  }
  uk.free();
  eng.release();
}

const UK_KC = 256;

/**
 * Bare-microkernel samples on L1-resident operands (the engine's calling-thread instance): `sample`
 * runs the f32 4x8 kernel reps times at kc = UK_KC; `sampleInt` the integer 3x8 kernel on the same
 * bytes as int16 (2 UK_KC k-values), reps / 2 times; `sampleW8` / `sampleW4` the same kernel on those
 * bytes as x8 / x4 code panels.
 */
function ukernelSampler(eng: Engine, reps: number): {
  sample: () => void; sampleInt: () => void; sampleW8: () => void; sampleW4: () => void; sampleDecode8: () => void; sampleDecode4: () => void;
  flops: number; intOps: number; decodeFlops: number; free: () => void;
} {
  const k = eng.kernels!;
  const a = eng.alloc(4 * UK_KC * 4), wp = eng.alloc(UK_KC * 8 * 4), c = eng.alloc(4 * 8 * 4);
  fillRandom(new Float32Array(eng.buffer, a, 4 * UK_KC), 1);
  fillRandom(new Float32Array(eng.buffer, wp, UK_KC * 8), 2, 0.01);
  const repsInt = reps / 2;
  return {
    sample: () => void k.ukernel_f32(reps, UK_KC, a, wp, c),
    sampleInt: () => void k.ukernel_s16(repsInt, 2 * UK_KC, a, wp, c),
    sampleW8: () => void k.ukernel_int(repsInt, 3, 2 * UK_KC, JOB_DT_ALL.s8, a, wp, c),
    sampleW4: () => void k.ukernel_int(repsInt, 3, 2 * UK_KC, JOB_DT_ALL.s4, a, wp, c),
    // two panels of s8 (s4) codes UK_KC * 8 (UK_KC * 4) bytes apart, inside wp's UK_KC * 32 bytes
    sampleDecode8: () => void k.ukernel_lowp16(reps, UK_KC, JOB_DT_ALL.s8, a, wp, UK_KC * 8, c, 0),
    sampleDecode4: () => void k.ukernel_lowp16(reps, UK_KC, JOB_DT_ALL.s4, a, wp, UK_KC * 4, c, 0),
    flops: 2 * 4 * 8 * UK_KC * reps,
    decodeFlops: 2 * 16 * UK_KC * reps,
    intOps: 2 * 3 * 8 * 2 * UK_KC * repsInt,
    free: () => [a, wp, c].forEach((p) => eng.free(p)),
  };
}

async function runMatmul(w: Workload, eng: Engine, threads: number, isaName: string): Promise<void> {
  const strm = new Stream(eng);
  const ukernel = ukernelSampler(eng, 4000);
  const E = w.sizes.length;
  const totalM = w.sizes.reduce((a, b) => a + b, 0);
  const { K, N } = w;
  const flops = usefulFlops(w);
  const srcMd = w.dense ? memory.desc([totalM, K], dtArg, tag.ab) : memory.desc.grouped([totalM, K], dtArg, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = w.dense ? memory.desc([totalM, N], dtArg, tag.ab) : memory.desc.grouped([totalM, N], dtArg, E, [RUNTIME_DIM_VAL, N]);
  const weiDims = w.dense ? [K, N] : [E, K, N];
  const src = Memory.create(srcMd, eng);
  const dst = Memory.create(dstMd, eng, w.dense ? undefined : [undefined, src.handles[1]]);
  if (!w.dense) {
    let acc = 0;
    src.offsets[0] = 0;
    w.sizes.forEach((s, i) => (src.offsets[i + 1] = acc += s));
  }
  const f32src = new Float32Array(src.desc.nelems);
  fillRandom(f32src, 3);
  src.write(f32src);
  const plainTag = w.dense ? tag.ab : tag.abc;
  const userWeiMd = memory.desc(weiDims, dtArg, plainTag);
  const userWei = Memory.create(userWeiMd, eng);
  if (dtArg === 'f32') fillRandom(userWei.values as Float32Array, 4, 0.05);
  else {
    const tmp = new Float32Array(userWeiMd.nelems);
    fillRandom(tmp, 4, 0.05);
    userWei.write(tmp);
  }
  const dtName = dtArg;
  for (const form of weightForms) {
    let weiMem: Memory;
    let pd: matmul.PrimitiveDesc;
    let free = false;
    if (form === 'packed') {
      pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc(weiDims, dtArg, tag.any), dstMd);
      weiMem = Memory.create(pd.queryMd('weights')!, eng);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, userWeiMd, weiMem.desc)).execute(strm, { [ARG.FROM]: userWei, [ARG.TO]: weiMem });
      await strm.wait();
      free = true;
    } else if (form === 'abc') {
      pd = new matmul.PrimitiveDesc(eng, srcMd, userWeiMd, dstMd);
      weiMem = userWei;
    } else if (form === 'acb') {
      if (w.dense) continue;
      const acbMd = memory.desc(weiDims, dtArg, tag.acb);
      weiMem = Memory.create(acbMd, eng);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, userWeiMd, acbMd)).execute(strm, { [ARG.FROM]: userWei, [ARG.TO]: weiMem });
      await strm.wait();
      pd = new matmul.PrimitiveDesc(eng, srcMd, acbMd, dstMd);
      free = true;
    } else throw new Error(`unknown --weights form ${form}`);
    const mm = new matmul.Primitive(pd);
    const run = async (): Promise<void> => {
      mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: weiMem, [ARG.DST]: dst });
      await strm.wait();
    };
    let t: Timing;
    if (form === 'packed' && dtArg === 'f32') {
      const [tm, tu] = await timePaired(run, ukernel.sample, { minMs });
      t = tm;
      report(row(`ukernel~${w.name}`, `wasm:${eng.isa}:f32-gemm-4x8 kc=${UK_KC}`, 'f32', 1, tu, ukernel.flops, 'sampled between the runs of the next row'));
    } else t = await timeIt(run, { minMs });
    let note = `weights=${form}`;
    if (w.name === 'decode') {
      const touched = w.sizes.filter((s) => s > 0).length;
      const bytes = touched * K * N * (form === 'packed' ? 4 : DT.f32 === dtArg ? 4 : 2);
      note += ` experts=${touched} weights=${(bytes / 1e6).toFixed(1)}MB ${(bytes / t.median / 1e6).toFixed(1)}GB/s`;
      if (form === 'packed' && threads === 1) {
        const packedFloats = touched * K * N;
        const k = eng.kernels!;
        const ts = await timeIt(() => {
          // Stream the same number of bytes from the packed buffer, one expert after another.
          const per = K * N;
          for (let e = 0; e < touched; e++) k.stream_f32(weiMem.handles[0] + e * per * 4, per);
        }, { minMs });
        report(row(w.name, 'stream-touched-weights-once', 'f32', 1, ts, 0, `${(packedFloats * 4 / ts.median / 1e6).toFixed(1)}GB/s ratio=${(t.median / ts.median).toFixed(2)}`));
      }
    }
    report(row(w.name, `${pd.implInfo}`, dtName, threads, t, flops, note + (isaName !== 'auto' ? ` isa=${isaName}` : '')));
    if (free) weiMem.free();
  }
  for (const peer of peers) {
    if (peer !== 'ort' || w.dense || dtArg !== 'f32') continue;
    // onnxruntime-web fixes its thread count per process: measure it in a child process.
    const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(new URL('./ort_peer_cli.ts', import.meta.url)), `--workload=${w.name}`, `--threads=${threads}`, `--min-ms=${minMs}`], { encoding: 'utf8', maxBuffer: 1 << 24 });
    const line = child.stdout.trim().split('\n').pop() ?? '';
    if (child.status !== 0 || !line.startsWith('{')) throw new Error(`onnxruntime-web peer failed: ${child.stderr}`);
    report(JSON.parse(line) as Row);
  }
  src.free();
  dst.free();
  userWei.free();
  ukernel.free();
}

async function main(): Promise<void> {
  const engineKind = args.get('engine') ?? 'cpu';
  if (engineKind !== 'cpu' && engineKind !== 'gpu') throw new Error(`--engine must be cpu or gpu, got '${engineKind}'`);
  if (engineKind === 'gpu') {
    // The gpu engine has its own benches: the layer here, the grouped GEMM in bench/gpu_bench.ts.
    if (mode !== 'moe') throw new Error(`--engine=gpu: --mode=${mode} runs on the cpu engine only; --mode=moe runs the MoE layer on the gpu, \`npm run bench:gpu\` the grouped GEMM`);
    const { runGpuMoe, gpuMoeOptionsFrom } = await import('./gpu_moe_bench.js');
    await runGpuMoe(gpuMoeOptionsFrom(args));
    return;
  }
  if (!json) {
    // --isa=auto resolves per runtime (relaxed where it is on by default: Node 22+): name what it ran
    const builds = isaList.map((i) => `${i}${i === 'auto' ? `=${resolveIsa('auto') ?? '-'}` : ''}`).join(',');
    console.log(`groupdnn bench  node ${process.version}  kernels ${builds}  cores ${availableParallelism()}  threads ${threadList.join(',')}  dt ${dtArg}`);
    for (const w of workloads) console.log(`  ${w.name}: ${w.description}; sizes ${w.sizes.join('+')}`);
    console.log(`${'workload'.padEnd(10)} ${'impl'.padEnd(34)} ${'dt'.padEnd(5)} thr  median_ms     min_ms     max_ms   GFLOP/s  ${'runtime/kernels'.padEnd(20)}`);
  }
  if (mode === 'all' || mode === 'peak' || mode === 'ukernel') for (const isa of isaList) await peakAndUkernel(isa);
  if (mode === 'all' || mode === 'matmul') {
    for (let r = 0; r < rounds; r++) {
      for (const isa of isaList) {
        for (const threads of threadList) {
          const eng = await Engine.create({ threads, kernels: isa });
          for (const w of workloads) await runMatmul(w, eng, threads, isa);
          eng.release();
        }
      }
    }
  }
  if (mode === 'dglu') await runDglu();
  else if (mode === 'quant') await runQuant();
  else if (mode === 'weights') await runWeights();
  else if (mode === 'nbits') { // onnxruntime-web loads only for this mode
    const { nbitsCompare } = await import('./ort_nbits_peer.js');
    const { ortVersion } = await import('./ort_peer.js');
    for (const w of workloads) {
      const r = await nbitsCompare(w, minMs);
      console.log(`${w.name}: groupdnn ${r.impl} ${r.ours.median.toFixed(2)} ms, onnxruntime-web ${ortVersion} MatMulNBits (4 bits, block 32) per-expert loop ${r.ort.median.toFixed(2)} ms; ORT / ours = ${r.ratio.toFixed(2)} (median of ${r.ours.runs} interleaved rounds, 1 thread each); max |diff| / max |y| = ${r.maxRelDiff.toExponential(1)}`);
    }
  } else if (mode === 'reorder') await runReorder();
  else if (mode === 'moe') await runMoe();
  else if (mode === 'backward') runBackward();
  else if (mode === 'moe-backward') runMoeBackward();
  else if (!json) summarize();
}

/**
 * --mode=backward: per thread count (own process), interleaved rounds of the forward GEMM, backward
 * data and backward weights on one workload (default moe-b); ratios = backward / forward time per
 * round, median over rounds (bench/backward_bench.ts). Defaults: 9 rounds of 1 sample each.
 */
function runBackward(): void {
  const w = backwardWorkload(args.get('workload'));
  const r = Number(args.get('rounds') ?? 9), samples = Number(args.get('samples') ?? 1);
  const all: BackwardRow[] = [];
  for (const threads of threadList) {
    for (const isa of isaList) {
      for (const x of backwardChild(w, threads, isa, r, samples)) {
        all.push(x);
        report({ workload: x.workload, impl: x.impl, dt: 'f32', threads, median_ms: x.median_ms, min_ms: x.min_ms, max_ms: x.max_ms, gflops: x.gflops, note: x.variant });
      }
    }
  }
  if (json) return;
  const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1];
  console.log(`\n${w.name}: ${w.description}; ${r} interleaved rounds x ${samples} sample(s)`);
  console.log('| threads | variant | median ms | / forward (median of rounds) [per round] |\n|---|---|---|---|');
  for (const x of all) {
    const ratio = x.ratios.length ? `${med(x.ratios).toFixed(3)} [${x.ratios.map((v) => v.toFixed(2)).join(' ')}]` : '(one run)';
    console.log(`| ${x.threads} | ${x.variant} | ${x.median_ms.toFixed(1)} | ${ratio} |`);
  }
}

/** --mode=moe-backward: the layer's backward / forward per round, one process per round and thread count. */
function runMoeBackward(): void {
  const name = args.get('workload') ?? 'moe-b-e32';
  const cli = fileURLToPath(new URL('./moe_backward_bench.ts', import.meta.url));
  const ratios = new Map<number, number[]>();
  for (let r = 0; r < rounds; r++) {
    for (const threads of threadList) {
      const child = spawnSync(process.execPath, [...process.execArgv, cli, `--workload=${name}`, `--threads=${threads}`, `--min-ms=${minMs}`], { encoding: 'utf8', maxBuffer: 1 << 24 });
      const rows = child.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as MoeBackwardRow);
      if (child.status !== 0 || rows.length === 0) throw new Error(`moe-backward round failed: ${child.stderr.slice(-2000)}`);
      for (const x of rows) report({ workload: x.workload, impl: x.what, dt: 'f32', threads, median_ms: x.median_ms, min_ms: x.min_ms, max_ms: x.max_ms, gflops: 0, note: `${x.note} round=${r}` });
      const fwd = rows.find((x) => x.what === 'forward_training')!, bwd = rows.find((x) => x.what === 'backward')!;
      ratios.set(threads, [...(ratios.get(threads) ?? []), bwd.median_ms / fwd.median_ms]);
    }
  }
  if (json) return;
  const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1];
  console.log(`\n${name}: backward / forward_training, median of ${rounds} rounds [per round] (target <= 2.5)`);
  for (const [threads, v] of ratios) console.log(`| ${threads} | ${med(v).toFixed(3)} [${v.map((x) => x.toFixed(2)).join(' ')}] |`);
}

/** --mode=moe: rounds of (ours at each thread count, then each onnxruntime-web variant), ratios per round. */
async function runMoe(): Promise<void> {
  const ws = moeWorkloads(args.get('workload'));
  const variants = (args.get('ort') ?? 'moe-f32,qmoe-int8,qmoe-int4').split(',').filter(Boolean);
  const all: MoeRow[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const w of ws) {
      for (const threads of threadList) {
        for (const isa of isaList) {
          const ours = moeRoundChild(w, threads, isa, minMs);
          ours.forEach((x) => { all.push({ ...x, note: `${x.note ?? ''} round=${r}` }); report(x as Row); });
        }
        for (const v of variants) {
          const o = ortMoeRow(w, threads, v, minMs);
          if (o) { all.push({ ...o, note: `${o.note ?? ''} round=${r}` }); report(o as Row); }
        }
      }
    }
  }
  if (json) return;
  console.log('\n| workload | threads | groupdnn ms | ORT MoE f32 ms | ORT / groupdnn (median of rounds) [per round] | groupdnn w8 ms | ORT QMoE int8 ms | groupdnn w4 ms | ORT QMoE int4 ms |\n|---|---|---|---|---|---|---|---|---|');
  for (const w of ws) {
    for (const threads of threadList) {
      const pick = (impl: string): MoeRow[] => all.filter((x) => x.workload === w.name && x.threads === threads && x.impl.startsWith(impl));
      const ours = pick('groupdnn:moe.layer:simd128').concat(pick('groupdnn:moe.layer:relaxed')), f32 = pick('onnxruntime-web:moe-f32'), q8 = pick('onnxruntime-web:qmoe-int8'), q4 = pick('onnxruntime-web:qmoe-int4');
      const w8 = pick('groupdnn:moe.layer:w8'), w4 = pick('groupdnn:moe.layer:w4');
      const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1];
      const per = ours.map((o, i) => (f32[i] ? f32[i].median_ms / o.median_ms : NaN)).filter((v) => !Number.isNaN(v));
      const ms = (rs: MoeRow[]): string => (rs.length ? med(rs.map((x) => x.median_ms)).toFixed(1) : '-');
      console.log(`| ${w.name} | ${threads} | ${ms(ours)} | ${ms(f32)} | ${per.length ? `${med(per).toFixed(2)} [${per.map((v) => v.toFixed(2)).join(' ')}]` : '-'} | ${ms(w8)} | ${ms(q8)} | ${ms(w4)} | ${ms(q4)} |`);
    }
  }
}

/** --mode=dglu: the fused GLU-backward epilogue vs the GEMM it rides on (MoE-B GEMM2 diff_src), ratios per round. */
async function runDglu(): Promise<void> {
  const [alg, layout] = (args.get('glu') ?? 'glu_swiglu:halves').split(':') as [Parameters<typeof dgluBench>[4], Parameters<typeof dgluBench>[5]];
  for (const isa of isaList) {
    for (const threads of threadList) {
      const act = args.get('dglu-act') === 'bf16' ? 'bf16' : 'f32';
      const rs = await dgluBench(threads, isa, rounds, minMs, alg, layout, act);
      for (const r of rs) {
        if (json) console.log(JSON.stringify({ mode: 'dglu', isa, alg, layout, act, ...r }));
        else console.log(`dglu ${isa} ${alg}:${layout}${act === 'bf16' ? ' bf16 h13' : ''} threads=${threads} round=${r.round}: gemm ${r.gemm_ms.toFixed(1)} ms, gemm (fused path) ${r.gemm_fusedpath_ms.toFixed(1)} ms, gemm+dglu ${r.fused_ms.toFixed(1)} ms, standalone dglu ${r.standalone_ms.toFixed(1)} ms (${r.samples} samples each)`);
      }
      const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1];
      if (!json) {
        console.log(`dglu ${isa} threads=${threads}: gemm+dglu / gemm = ${med(rs.map((r) => r.ratio)).toFixed(3)} median of ${rs.length} rounds [${rs.map((r) => r.ratio.toFixed(3)).join(' ')}] (target <= 1.10)`);
        console.log(`dglu ${isa} threads=${threads}: gemm+dglu / gemm (fused path) = ${med(rs.map((r) => r.ratio_fusedpath)).toFixed(3)} [${rs.map((r) => r.ratio_fusedpath.toFixed(3)).join(' ')}]`);
      }
    }
  }
}

/**
 * --mode=weights (issue 12): every weight format (--variants=, bench/quant_bench.ts VARIANTS) against
 * f32 packed weights, samples interleaved round-robin in one engine; speed-up = median of the
 * per-round time ratios f32 / variant; GB/s of the weight bytes (codes + scales) of the touched experts.
 */
async function runWeights(): Promise<void> {
  const only = (args.get('variants') ?? 'f32,f32:abc,w8,w4,w4k32,fp8,mxfp4,nvfp4,int8').split(',');
  if (only[0] !== 'f32') only.unshift('f32');
  const form = args.get('weights') ?? 'packed';
  for (const isa of isaList) {
    for (const threads of threadList) {
      for (const w of workloads) {
        const qrows = await quantBench(w, threads, isa, minMs, form, only, clock, relaxedDot);
        const base = qrows.find((q) => q.variant === 'f32')!;
        const touched = w.sizes.filter((x) => x > 0).length;
        for (const q of qrows) {
          const bytes = touched * expertWeightBytes(q.variant, w.K, w.N);
          const err = q.error === undefined ? '' : `; err ${q.error.toExponential(2)} (max |out - f64 ref| / max |ref|)`;
          const note = `x${pairedRatio(base, q).toFixed(2)} vs f32 packed; weights ${(bytes / 1e6).toFixed(1)}MB ${(bytes / q.median_ms / 1e6).toFixed(1)}GB/s${clock === 'cpu' ? ' (cpu time)' : ''}${err}`;
          report({ workload: q.workload, impl: q.impl, dt: q.variant, threads, median_ms: q.median_ms, min_ms: q.min_ms, max_ms: q.max_ms, gflops: q.gflops, note });
        }
        if (!json) console.log(`  (${qrows[0].samples.length} interleaved rounds, ${clock === 'cpu' ? 'process CPU time' : 'wall time'}; command: npm run bench -- --mode=weights --workload=${w.name} --threads=${threads} --isa=${isa} --variants=${only.join(',')} --min-ms=${minMs}${clock === 'cpu' ? ' --clock=cpu' : ''}${relaxedDot ? ' --relaxed-dot' : ''})`);
      }
    }
  }
}

/**
 * --mode=reorder (issue 19): reorders into the packed layouts vs a plain copy of the same bytes on the
 * workers, interleaved; --reorder-dims=G,K,N (default 8,2048,1408: 8 MoE-B experts, 92 MB of f32; the s8 and s4 layouts take 4x and 8x the experts, the same bytes).
 */
async function runReorder(): Promise<void> {
  const dims = (args.get('reorder-dims') ?? '8,2048,1408').split(',').map(Number);
  const only = args.get('layouts')?.split(',');
  console.log(`\nreorder [${dims.join(',')}] vs a plain copy of the same bytes (copy op job), ${rounds} interleaved rounds; ratio = median of per-round reorder / copy (target <= 2)`);
  console.log('| layout | threads | runtime/kernels | MB | reorder ms | copy ms | reorder GB/s | reorder / copy |\n|---|---|---|---|---|---|---|---|');
  for (const isa of isaList)
    for (const threads of threadList)
      for (const r of await reorderBench(dims, threads, isa, rounds, only))
        console.log(`| ${r.layout} | ${threads} | ${RUNTIME}/${r.isa} | ${(r.bytes / 1e6).toFixed(1)} | ${r.median_ms.toFixed(1)} | ${r.copy_ms.toFixed(1)} | ${(r.bytes / r.median_ms / 1e6).toFixed(2)} | ${r.ratio.toFixed(2)} |`);
}

/** --mode=quant: f32 / int8 / fused variants interleaved per engine, the two targets as ratios, table rows. */
async function runQuant(): Promise<void> {
  const form = args.get('weights') ?? 'packed';
  const table: string[] = [];
  for (const isa of isaList) {
    for (const threads of threadList) {
      for (const w of workloads) {
        const qrows = await quantBench(w, threads, isa, minMs, form);
        for (const q of qrows) {
          report({ workload: q.workload, impl: q.impl, dt: q.variant, threads, median_ms: q.median_ms, min_ms: q.min_ms, max_ms: q.max_ms, gflops: q.gflops, note: `weights=${form}${isa !== 'auto' ? ` isa=${isa}` : ''}` });
        }
        const r = quantRatios(qrows);
        const cmd = `npm run bench -- --mode=quant --workload=${w.name} --threads=${threads} --isa=${isa} --weights=${form} --min-ms=${minMs}`;
        const isaName = qrows[0].impl.split(':')[1];
        table.push(`| (a) int8 / f32 GFLOP/s | ${w.name} | ${threads} | ${isaName} | ${r.a.toFixed(3)} | >= 1.60 | \`${cmd}\` |`);
        table.push(`| (b) f32+scales+bias+swiglu / f32 time | ${w.name} | ${threads} | ${isaName} | ${r.b.toFixed(3)} | <= 1.10 | \`${cmd}\` |`);
        table.push(`| int8+bias+swiglu / int8 time | ${w.name} | ${threads} | ${isaName} | ${r.fusedInt8.toFixed(3)} | - | \`${cmd}\` |`);
      }
    }
  }
  if (json) return;
  console.log('\n| target | workload | threads | isa | ratio | goal | command |\n|---|---|---|---|---|---|---|');
  for (const t of table) console.log(t);
}

/** Rows of one measurement repeated over --rounds merged: the median of the per-round medians (notes
 * carry per-round readings such as cpu/wall, so rows match on impl and threads; callers select the
 * weights form). */
function merged(match: Row[]): Row | undefined {
  if (match.length <= 1) return match[0];
  const same = match.filter((r) => r.impl === match[0].impl && r.threads === match[0].threads);
  const med = [...same].sort((a, b) => a.median_ms - b.median_ms)[same.length >> 1];
  return { ...med, min_ms: Math.min(...same.map((r) => r.min_ms)), max_ms: Math.max(...same.map((r) => r.max_ms)) };
}

function summarize(): void {
  const find = (wl: string, pred: (r: Row) => boolean): Row | undefined => merged(rows.filter((r) => r.workload === wl && pred(r)));
  const lines: string[] = [];
  for (const isa of ['simd128', 'relaxed']) {
    const p = rows.find((r) => r.workload === 'peak' && r.impl.includes(isa)), u = rows.find((r) => r.workload === 'ukernel' && r.impl.includes(isa));
    if (p && u) lines.push(`ukernel / peak (${isa.padEnd(7)})     = ${(u.gflops / p.gflops).toFixed(3)} median, ${u.note?.replace('best/best=', '')} best  (target >= 0.90)`);
  }
  for (const wl of ['moe-a', 'moe-b']) {
    const r = find(wl, (x) => x.threads === 1 && (x.note ?? '').startsWith('weights=packed'));
    // The ukernel samples taken between this workload's runs (same interference), per round.
    const paired = rows.filter((x) => x.workload === wl && x.threads === 1 && (x.note ?? '').startsWith('weights=packed')).map((x) => {
      const i = rows.indexOf(x);
      const u = rows[i - 1];
      return u && u.workload === `ukernel~${wl}` ? x.gflops / u.gflops : undefined;
    }).filter((v): v is number => v !== undefined).sort((a, b) => a - b);
    if (paired.length) lines.push(`${wl} packed 1T / ukernel       = ${paired[paired.length >> 1].toFixed(3)}  (target >= 0.80; ukernel sampled between the runs${paired.length > 1 ? `, median of ${paired.length} rounds` : ''})`);
    const rp = find(wl, (x) => x.threads === 1 && (x.note ?? '').startsWith('weights=abc'));
    if (r && rp) lines.push(`${wl} plain abc / packed (1T)   = ${(rp.gflops / r.gflops).toFixed(3)}`);
  }
  const b1 = find('moe-b', (x) => x.threads === 1 && (x.note ?? '').startsWith('weights=packed'));
  const b2 = find('moe-b', (x) => x.threads > 1 && (x.note ?? '').startsWith('weights=packed'));
  if (b1 && b2) lines.push(`moe-b packed ${b2.threads}T / 1T            = ${(b2.gflops / b1.gflops).toFixed(3)}  (target >= 1.80)`);
  for (const wl of ['moe-a', 'moe-b']) {
    for (const th of threadList) {
      const isOurs = (x: Row): boolean => x.workload === wl && x.threads === th && (x.note ?? '').startsWith('weights=packed');
      const isOrt = (x: Row): boolean => x.workload === wl && x.threads === th && x.impl.startsWith('onnxruntime');
      const ours = merged(rows.filter(isOurs)), ort = merged(rows.filter(isOrt));
      // Each round runs ours, then the peer: their per-round ratios show how much the machine moved.
      const o = rows.filter(isOurs), p = rows.filter(isOrt);
      const perRound = o.length > 1 && o.length === p.length ? `; per round ${o.map((r, i) => (p[i].median_ms / r.median_ms).toFixed(2)).join(' ')}` : '';
      if (ours && ort) lines.push(`${wl} ${th}T groupdnn / onnxruntime-web = ${(ort.median_ms / ours.median_ms).toFixed(3)}  (target >= 1.50${perRound})`);
    }
  }
  const st = find('decode', (x) => x.impl === 'stream-touched-weights-once');
  const dec = find('decode', (x) => x.threads === 1 && (x.note ?? '').startsWith('weights=packed'));
  if (st && dec) lines.push(`decode packed 1T / stream once = ${(dec.median_ms / st.median_ms).toFixed(3)}  (target <= 2.0)`);
  if (lines.length) console.log(`\nratios (same run):\n  ${lines.join('\n  ')}`);
}

await main();
