/**
 * Checks onnxruntime-web's WebGPU-EP MoE / QMoE (ort_moe_gpu.ts) against groupdnn's cpu-engine layer on
 * a small shape, and reports where ORT ran each op:
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json npx tsx bench/ort_moe_gpu_peer_check.ts [--variants=...] [--json]
 * (the ICD line only where there is no GPU driver: Dawn on SwiftShader). Exit status 1 when a variant is
 * out of tolerance.
 *
 * Compared: `moe-f32` against groupdnn's f32 layer; `qmoe-int8` / `qmoe-int4` against groupdnn's f32 layer
 * on the dequantized weights ((q - zero) * scale, exactly what QMoE multiplies by), so the difference left
 * is ORT's arithmetic, not the quantization. Tolerances (max |ORT - groupdnn| / max |out|), written down:
 * 1e-5 for every variant: f32 sums in another order (right runs on SwiftShader: f32 1.6e-7, int8 2.6e-7,
 * int4 2.9e-7, so the activations are not quantized). Each variant runs 3 times and the worst run counts:
 * on SwiftShader ORT 1.30's WebGPU QMoE at T > 1 gives wrong outputs (0.76-1.0) in some runs and right
 * ones in others, with experts missing from the run (fewer gather / MatMulNBits programs than experts
 * used): its per-expert counts come back to the host wrong. T = 1 (no read-back) was right in every run.
 * Also printed, not checked: the difference to the f32 layer (the quantization error itself).
 * Not a vitest test: it fails for ORT's reasons on SwiftShader, and takes 1-2.5 minutes there.
 */
import { dequantizeRows, fromOrtLayout, toOrtLayout, type OrtMoeVariant } from './ort_moe_model.js';
import { buildOrtMoeGpuModel, createOrtMoeGpuPeer, describeOrtMoeGpu } from './ort_moe_gpu.js';
import { groupdnnMoeLayer, relMaxDiff } from './moe_layer_cpu.js';
import { fillRandom } from './timing.js';

export const CHECK_SHAPE = { T: 7, E: 4, k: 2, K: 64, I: 48 } as const;
const RUNS = 3;
export const TOLERANCE: Readonly<Record<OrtMoeVariant, number>> = { 'moe-f32': 1e-5, 'qmoe-int8': 1e-5, 'qmoe-int4': 1e-5 };

export interface GpuCheckRow {
  variant: OrtMoeVariant;
  /** max |ORT - groupdnn on the weights ORT multiplies by| / max |out|. */
  relDiff: number;
  /** relDiff of each run. */
  runs: number[];
  tolerance: number;
  /** max |ORT - groupdnn f32| / max |out| (quantization error included). */
  relDiffToF32: number;
  placements: string[];
  programs: Record<string, number>;
}

/** Runs each variant on the WebGPU EP and the matching groupdnn cpu layer. */
export async function checkOrtMoeGpu(variants: readonly OrtMoeVariant[]): Promise<GpuCheckRow[]> {
  const s = CHECK_SHAPE;
  const w13 = new Float32Array(s.E * s.K * 2 * s.I), w2 = new Float32Array(s.E * s.I * s.K);
  const hidden = new Float32Array(s.T * s.K), logits = new Float32Array(s.T * s.E);
  fillRandom(w13, 1, 0.2);
  fillRandom(w2, 2, 0.2);
  fillRandom(hidden, 3);
  fillRandom(logits, 4, 4);
  const f32 = await groupdnnMoeLayer(s, w13, w2, hidden, logits);
  const rows: GpuCheckRow[] = [];
  for (const variant of variants) {
    let ref = f32;
    if (variant !== 'moe-f32') {
      const bits = variant === 'qmoe-int8' ? 8 : 4;
      const { fc1, fc2 } = toOrtLayout(s, w13, w2);
      const dq = fromOrtLayout(s, dequantizeRows(fc1, s.E * 2 * s.I, s.K, bits), dequantizeRows(fc2, s.E * s.K, s.I, bits));
      ref = await groupdnnMoeLayer(s, dq.w13, dq.w2, hidden, logits);
    }
    const model = buildOrtMoeGpuModel(s, variant, w13, w2);
    const { placements, programs } = await describeOrtMoeGpu(s, model, hidden, logits);
    const peer = await createOrtMoeGpuPeer(s, model, 'host');
    // Several runs: the worst one counts (a run that differs from the others is a wrong result too).
    const y = new Float32Array(s.T * s.K);
    const diffs: number[] = [];
    let toF32 = 0;
    for (let r = 0; r < RUNS; r++) {
      await peer.run(hidden, logits, y);
      diffs.push(relMaxDiff(y, ref));
      toF32 = Math.max(toF32, relMaxDiff(y, f32));
    }
    await peer.close();
    rows.push({ variant, relDiff: Math.max(...diffs), runs: diffs, tolerance: TOLERANCE[variant], relDiffToF32: toF32, placements, programs: Object.fromEntries(programs) });
  }
  return rows;
}

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, ''));
if (isMain) {
  const arg = (name: string): string | undefined => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const variants = (arg('variants') ?? 'moe-f32,qmoe-int8,qmoe-int4').split(',') as OrtMoeVariant[];
  for (const v of variants) if (!(v in TOLERANCE)) throw new Error(`unknown variant ${v} (moe-f32, qmoe-int8, qmoe-int4)`);
  const rows = await checkOrtMoeGpu(variants);
  let ok = true;
  for (const r of rows) {
    const pass = r.relDiff <= r.tolerance;
    ok &&= pass;
    if (process.argv.includes('--json')) console.log(JSON.stringify({ ...r, pass }));
    else {
      console.log(`${r.variant}: max |ORT webgpu - groupdnn| / max |out| = ${r.relDiff.toExponential(2)} (runs ${r.runs.map((d) => d.toExponential(1)).join(' ')}; tolerance ${r.tolerance.toExponential(0)}: ${pass ? 'ok' : 'FAIL'}); vs the f32 layer ${r.relDiffToF32.toExponential(2)}`);
      console.log(`  placement: ${r.placements.join(' | ') || '(none logged)'}`);
      console.log(`  WebGPU programs in one run: ${Object.entries(r.programs).map(([k, n]) => `${k} x${n}`).join(', ') || 'none'}`);
    }
  }
  process.exit(ok ? 0 : 1);
}
