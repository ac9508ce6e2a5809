/**
 * The MoE-layer peer on onnxruntime-web's WebGPU execution provider (Node + Dawn, see ort_webgpu_node.ts):
 * the same one-node `MoE` / `QMoE` model as the wasm-EP peer (ort_moe_model.ts), the same weights and
 * routing, with a symbolic token dim so one session serves every T.
 *
 * Two ways to take the output, both timed by the bench (bench/ort_moe_gpu_peer.ts):
 *  - `run`: `session.run` with host inputs and outputs (what an ORT user sees by default: upload X and R,
 *    run, read Y back to a Float32Array);
 *  - `runOnGpu`: a session with `preferredOutputLocation: 'gpu-buffer'`: Y stays in a GPUBuffer; the run
 *    ends when the device's queue is done (`onSubmittedWorkDone` on ORT's device), so the GPU time is in.
 * `describeOrtMoeGpu` creates a session with ORT's verbose log on (a session's log level holds for all its
 * runs, whatever the run options say, so the timed sessions are created quiet), runs it once and reports
 * where the node was placed and which WebGPU programs ran (ORT 1.30's QMoE: a gate, then for T > 1 a
 * read-back of the per-expert counts to the host, then per used expert: gather, MatMulNBits, SwiGLU,
 * MatMulNBits, final mix; for T = 1 the same without the read-back).
 */
import * as ort from 'onnxruntime-web/webgpu';
import { captureOutput, parsePlacements, parsePrograms } from './ort_log_capture.js';
import { buildMoeModel, toOrtLayout, type OrtMoeShape, type OrtMoeVariant } from './ort_moe_model.js';
import { installOrtWebGpu, type OrtWebGpuOptions } from './ort_webgpu_node.js';

export type OrtOutputLocation = 'host' | 'gpu';

export interface OrtMoeGpuPeer {
  readonly output: OrtOutputLocation;
  /** out [T, K] = MoE(hidden [T, K], logits [T, E]); T = hidden.length / K. Host output only. */
  run(hidden: Float32Array, logits: Float32Array, out: Float32Array): Promise<void>;
  /** The same with Y kept on the GPU (output 'gpu'); resolves when the GPU is done. */
  runOnGpu(hidden: Float32Array, logits: Float32Array): Promise<void>;
  close(): Promise<void>;
}

function sessionOptions(weights: Uint8Array, output: OrtOutputLocation, verbose: boolean): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: ['webgpu'],
    graphOptimizationLevel: 'all',
    externalData: [{ path: 'weights.bin', data: weights }],
    ...(verbose ? { logSeverityLevel: 0, logVerbosityLevel: 1 } : { logSeverityLevel: 3 }),
    ...(output === 'gpu' ? { preferredOutputLocation: 'gpu-buffer' as const } : {}),
  };
}

function feedsOf(s: OrtMoeShape, hidden: Float32Array, logits: Float32Array): Record<string, ort.Tensor> {
  const T = hidden.length / s.K;
  return { X: new ort.Tensor('float32', hidden, [T, s.K]), R: new ort.Tensor('float32', logits, [T, s.E]) };
}

/** The model bytes of a variant with a symbolic token dim, from groupdnn-layout weights w13 [E, K, 2I], w2 [E, I, K]. */
export function buildOrtMoeGpuModel(s: OrtMoeShape, variant: OrtMoeVariant, w13: Float32Array, w2: Float32Array): OrtMoeModel {
  const { fc1, fc2 } = toOrtLayout(s, w13, w2);
  return buildMoeModel(s, variant, fc1, fc2, 'T');
}

export interface OrtMoeModel {
  readonly model: Uint8Array;
  readonly weights: Uint8Array;
}

/** Where ORT placed the node and the WebGPU programs one run started (name -> count), from its verbose log. */
export async function describeOrtMoeGpu(
  s: OrtMoeShape, { model, weights }: OrtMoeModel, hidden: Float32Array, logits: Float32Array, opts: OrtWebGpuOptions = {},
): Promise<{ placements: string[]; programs: Map<string, number> }> {
  await installOrtWebGpu(opts);
  const { value: session, text } = await captureOutput(() => ort.InferenceSession.create(model, sessionOptions(weights, 'host', true)));
  try {
    const { value: r, text: log } = await captureOutput(() => session.run(feedsOf(s, hidden, logits)));
    r.Y.dispose();
    return { placements: parsePlacements(text), programs: parsePrograms(log) };
  } finally {
    await session.release();
  }
}

/** A session of the model (buildOrtMoeGpuModel); s.T is ignored (symbolic). */
export async function createOrtMoeGpuPeer(
  s: OrtMoeShape, { model, weights }: OrtMoeModel, output: OrtOutputLocation = 'host', opts: OrtWebGpuOptions = {},
): Promise<OrtMoeGpuPeer> {
  await installOrtWebGpu(opts);
  // ORT's default logger (verbose for describeOrtMoeGpu's sake) prints the EP's setup: kept off the output.
  const { value: session } = await captureOutput(() => ort.InferenceSession.create(model, sessionOptions(weights, output, false)));
  const device = output === 'gpu' ? ((await ort.env.webgpu.device) as GPUDevice) : undefined;
  const feeds = (hidden: Float32Array, logits: Float32Array): Record<string, ort.Tensor> => feedsOf(s, hidden, logits);
  return {
    output,
    async run(hidden, logits, out) {
      if (output !== 'host') throw new Error('OrtMoeGpuPeer.run: this session keeps its output on the GPU; use runOnGpu');
      const r = await session.run(feeds(hidden, logits));
      out.set(r.Y.data as Float32Array);
      r.Y.dispose();
    },
    async runOnGpu(hidden, logits) {
      if (!device) throw new Error("OrtMoeGpuPeer.runOnGpu: this session reads its output to the host; create it with output 'gpu'");
      const r = await session.run(feeds(hidden, logits));
      await device.queue.onSubmittedWorkDone();
      r.Y.dispose();
    },
    close: async () => void (await captureOutput(() => session.release())),
  };
}
