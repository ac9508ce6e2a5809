/**
 * onnxruntime-web's WebGPU EP running the MoE layer (its `QMoE` int4 / int8, its f32 `MoE`) on MoE-B shapes
 * (E = 64, top-6, K = 2048, I = 1408), the peer of groupdnn's gpu MoE layer (issue 21):
 *   npm run bench:ort-gpu -- --tokens=1,4,256 --variants=qmoe-int4,qmoe-int8,moe-f32 --reps=10
 * (add VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json where there is no GPU driver), or bundled
 * for a machine without npm (the device tool's):
 *   npx esbuild bench/ort_moe_gpu_peer.ts --bundle --platform=node --format=esm --outfile=D/ort_moe_gpu_peer.mjs
 *   xz -9 -c node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.wasm > D/ort-wasm-simd-threaded.asyncify.wasm.xz
 * D/ then holds ort_moe_gpu_peer.mjs (1.9 MB) and the wasm.xz (3.75 MB; 26.8 MB unpacked, sha256 39f9f089...);
 * beside them D/node_modules/webgpu/{index.js,package.json,dist/linux-x64/dawn.node} as for gpu_bench.mjs
 * (the addon is imported at run time, never bundled). There: `xz -d D/*.xz` and
 *   node D/ort_moe_gpu_peer.mjs --tokens=1,4,256 --variants=qmoe-int4,qmoe-int8,moe-f32 --reps=10
 * The wasm must sit beside the .mjs (read with fs: the browser glue of ORT's bundled build cannot load it).
 * MoE-B needs about 10 GB of host memory (f32 weights in four layouts and the 2.2 GB external-data blob).
 * Per variant, one session (symbolic token dim) per output location:
 *  - host: `session.run` with host tensors in and out, output read into a Float32Array (ORT's default);
 *  - gpu:  `preferredOutputLocation: 'gpu-buffer'`, the run timed until the device queue is done.
 * Median of --reps runs after --warmup runs, wall clock, per T and variant. Before timing, each (variant, T)
 * is checked (--check=0 skips): the host output of --check-runs runs against groupdnn's cpu-engine layer on
 * the weights ORT multiplies by (dequantized for QMoE) — ORT 1.30's WebGPU QMoE gave wrong outputs in some
 * runs on SwiftShader, so a time is only worth reporting next to its check. Also prints the node placement
 * and the WebGPU programs of one run. Options: --experts, --topk, --hidden, --inter (default MoE-B),
 * --output=host,gpu, --liftoff-only=1 (see ort_webgpu_node.ts; default 1), --json=PATH (also $OUT/ort_moe_gpu_peer.json).
 * `--liftoff-only=1` keeps ORT's wasm at V8's baseline tier: harmless for the GPU variants (their work is on
 * the GPU) but it slows f32 `MoE`, which 1.30 runs on its CPU kernel; for f32 times comparable to a normal
 * Node, run that variant again with --liftoff-only=0 on a machine with idle cores (V8's optimizing compile
 * of ORT's 27 MB wasm then stalls the first read-back for a while; the warm-up runs absorb it).
 * The gpu-buffer rows carry the host rows' check (same session kernels, output not read back).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildMoeModel, dequantizeRows, fromOrtLayout, toOrtLayout, type OrtMoeShape, type OrtMoeVariant } from './ort_moe_model.js';
import { createOrtMoeGpuPeer, describeOrtMoeGpu, type OrtOutputLocation } from './ort_moe_gpu.js';
import { groupdnnMoeLayer, relMaxDiff } from './moe_layer_cpu.js';
import { MOE_SEEDS, MOE_WEIGHT_SCALE } from './moe_workloads.js';
import { fillRandom, timingOf } from './timing.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const TOKENS = arg('tokens', '1,4,256').split(',').map(Number);
const VARIANTS = arg('variants', 'qmoe-int4,qmoe-int8,moe-f32').split(',') as OrtMoeVariant[];
const OUTPUTS = arg('output', 'host,gpu').split(',') as OrtOutputLocation[];
const REPS = Number(arg('reps', '10')), WARMUP = Number(arg('warmup', '3'));
const CHECK = arg('check', '1') !== '0', CHECK_RUNS = Number(arg('check-runs', '3'));
const shape: OrtMoeShape = { T: 0, E: Number(arg('experts', '64')), k: Number(arg('topk', '6')), K: Number(arg('hidden', '2048')), I: Number(arg('inter', '1408')) };
for (const v of VARIANTS) if (!['moe-f32', 'qmoe-int8', 'qmoe-int4'].includes(v)) throw new Error(`--variants: unknown ${v} (moe-f32, qmoe-int8, qmoe-int4)`);
for (const o of OUTPUTS) if (o !== 'host' && o !== 'gpu') throw new Error(`--output: unknown ${o} (host, gpu)`);
if (TOKENS.some((t) => !Number.isInteger(t) || t < 1)) throw new Error('--tokens: positive integers');
/** Check tolerance (max |ORT - groupdnn| / max |out|): f32 sums in another order; SwiftShader runs see 3e-7. */
const TOLERANCE = 1e-4;

interface Row {
  variant: OrtMoeVariant;
  output: OrtOutputLocation;
  T: number;
  medianMs: number;
  minMs: number;
  maxMs: number;
  reps: number;
  /** Worst max |ORT - groupdnn| / max |out| over the check runs (host output), or null unchecked. */
  checkRelDiff: number | null;
  checkRuns: number[];
  checkOk: boolean | null;
}

const { E, K, I } = shape;
const w13 = new Float32Array(E * K * 2 * I), w2 = new Float32Array(E * I * K);
fillRandom(w13, MOE_SEEDS.w13, MOE_WEIGHT_SCALE);
fillRandom(w2, MOE_SEEDS.w2, MOE_WEIGHT_SCALE);
// ORT's layout once (a 2.2 GB transpose at MoE-B), shared by every variant's model and reference.
const { fc1, fc2 } = toOrtLayout(shape, w13, w2);
const inputs = new Map(TOKENS.map((T) => {
  const hidden = new Float32Array(T * K), logits = new Float32Array(T * E);
  fillRandom(hidden, MOE_SEEDS.hidden);
  fillRandom(logits, MOE_SEEDS.logits, 4);
  return [T, { hidden, logits }] as const;
}));

/** The weights ORT multiplies by, in groupdnn's layout: f32 as is, QMoE's dequantized. */
function referenceWeights(variant: OrtMoeVariant): { w13: Float32Array; w2: Float32Array } {
  if (variant === 'moe-f32') return { w13, w2 };
  const bits = variant === 'qmoe-int8' ? 8 : 4;
  return fromOrtLayout(shape, dequantizeRows(fc1, E * 2 * I, K, bits), dequantizeRows(fc2, E * K, I, bits));
}

async function median(fn: () => Promise<void>): Promise<{ medianMs: number; minMs: number; maxMs: number; reps: number }> {
  for (let i = 0; i < WARMUP; i++) await fn();
  const t: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const t0 = performance.now();
    await fn();
    t.push(performance.now() - t0);
  }
  const s = timingOf(t), sorted = [...t].sort((a, b) => a - b);
  const mid = sorted.length % 2 ? sorted[(sorted.length - 1) / 2] : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
  return { medianMs: mid, minMs: s.min, maxMs: s.max, reps: s.runs };
}

const liftoffOnly = arg('liftoff-only', '1') !== '0';
const rows: Row[] = [];
console.log(`onnxruntime-web WebGPU EP MoE peer: E=${E} top-${shape.k} K=${K} I=${I}; tokens ${TOKENS.join(',')}; median of ${REPS} after ${WARMUP} warm-up; liftoff-only=${liftoffOnly}`);
for (const variant of VARIANTS) {
  const checks = new Map<number, { diffs: number[]; ok: boolean }>();
  const refW = CHECK ? referenceWeights(variant) : undefined;
  const first = inputs.get(TOKENS[0])!;
  const model = buildMoeModel(shape, variant, fc1, fc2, 'T');
  const d = await describeOrtMoeGpu(shape, model, first.hidden, first.logits, { liftoffOnly });
  console.log(`${variant}: placement ${d.placements.join(', ') || '(not logged)'}; WebGPU programs of one run at T=${TOKENS[0]}: ${[...d.programs].map(([k, n]) => `${k} x${n}`).join(', ') || 'none (not on the GPU)'}`);
  for (const output of OUTPUTS) {
    const t0 = performance.now();
    const peer = await createOrtMoeGpuPeer(shape, model, output, { liftoffOnly });
    console.log(`${variant} (output ${output}): session created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    for (const T of TOKENS) {
      const { hidden, logits } = inputs.get(T)!;
      if (output === 'host' && refW) {
        const ref = await groupdnnMoeLayer({ ...shape, T }, refW.w13, refW.w2, hidden, logits);
        const y = new Float32Array(T * K), diffs: number[] = [];
        for (let r = 0; r < CHECK_RUNS; r++) {
          await peer.run(hidden, logits, y);
          diffs.push(relMaxDiff(y, ref));
        }
        checks.set(T, { diffs, ok: diffs.every((d) => d <= TOLERANCE) });
      }
      const out = new Float32Array(T * K);
      const t = await median(output === 'host' ? () => peer.run(hidden, logits, out) : () => peer.runOnGpu(hidden, logits));
      const c = checks.get(T);
      rows.push({ variant, output, T, ...t, checkRelDiff: c ? Math.max(...c.diffs) : null, checkRuns: c?.diffs ?? [], checkOk: c?.ok ?? null });
      const note = c ? `check ${c.ok ? 'ok' : 'WRONG'} (max |ORT - groupdnn| / max |out| per run: ${c.diffs.map((d) => d.toExponential(1)).join(' ')})` : '(output not checked)';
      console.log(`  T=${String(T).padStart(4)} ${variant.padEnd(9)} output ${output.padEnd(4)}: median ${t.medianMs.toFixed(3)} ms (min ${t.minMs.toFixed(3)}, max ${t.maxMs.toFixed(3)}) ${note}`);
    }
    await peer.close();
  }
}

const json = JSON.stringify({ shape: { E, k: shape.k, K, I }, reps: REPS, warmup: WARMUP, liftoffOnly, tolerance: TOLERANCE, rows }, null, 1);
const jsonPath = arg('json', process.env.OUT ? join(process.env.OUT, 'ort_moe_gpu_peer.json') : '');
if (jsonPath) writeFileSync(jsonPath, json);
console.log('\nmedian ms (wait / read included)      ' + TOKENS.map((T) => `T=${T}`.padStart(10)).join(''));
for (const variant of VARIANTS) {
  for (const output of OUTPUTS) {
    const cells = TOKENS.map((T) => {
      const r = rows.find((x) => x.variant === variant && x.output === output && x.T === T)!;
      return `${r.medianMs.toFixed(2)}${r.checkOk === false ? '!' : ''}`.padStart(10);
    });
    console.log(`${`${variant} output ${output === 'host' ? 'host (read)' : 'gpu-buffer'}`.padEnd(37)}${cells.join('')}`);
  }
}
if (rows.some((r) => r.checkOk === false)) console.log("'!': ORT's output failed the check at that T (host rows; the gpu-buffer row runs the same kernels)");
process.exit(0);
