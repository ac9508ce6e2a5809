/**
 * Benchmark peer: onnxruntime-web (wasm backend, CPU EP / MLAS kernels) doing an MoE grouped GEMM the way
 * its users would: one MatMul per expert on that expert's slice of tokens.
 *
 * Design (what a typical ORT-web user writes):
 *  - The expert weights are constants, so every expert gets its own InferenceSession whose ONNX model is a
 *    single node `Y = MatMul(X, W)`; W [K, N] is an initializer (raw_data, float32) and X is [m, K] with a
 *    symbolic first dim 'm'. The ModelProto bytes are produced by the tiny protobuf encoder below
 *    (ir_version 8, opset 13, default domain ''), so no protobuf/onnx dependency is needed.
 *  - Per call, each non-empty expert's rows are wrapped as `new ort.Tensor('float32', x.subarray(...), [m, K])`
 *    (a zero-copy view on the JS side; ORT-web itself still copies the input into the wasm heap), the session
 *    is run, and the output (which ORT-web copies out of the wasm heap into a fresh Float32Array) is copied
 *    into y at the expert's rows. Experts run sequentially, one `session.run` per expert; empty experts are skipped.
 *
 * Threading caveat: ORT-web has ONE wasm instance per JS realm (process / worker), shared by all sessions,
 * and `ort.env.wasm.numThreads` is read exactly once, when that instance is initialised (first session
 * creation). The intra-op thread pool is global, so `threads` can only be chosen once per process: creating a
 * second peer with a different thread count in the same process throws. To compare thread counts, run each
 * configuration in its own process (see bench/ort_peer_check.ts). In Node 20 numThreads=2 really runs on two
 * threads (pthreads = worker_threads; CPU/wall ~1.99 during runs). ORT's pool spin-waits, so on a machine with
 * other load, threads=2 can be SLOWER than threads=1 — benchmark on an otherwise idle machine.
 *
 * Fixed cost: ~90 us per session.run (m=1, K=N=64, measured) — i.e. ~6 ms per call for E=64 — on top of
 * the X copy into and the Y copy out of the heap. The first 1-2 runs after creation are markedly slower: warm up.
 *
 * Memory: all sessions live in the same wasm32 heap (hard limit 4 GiB = 65536 pages). Measured with ORT-web
 * 1.30.0: each expert costs ~K*N*4 bytes of heap (E=64, K=2048, N=1408: 704 MiB of weights -> 777 MiB heap),
 * so that configuration fits comfortably. The heap only grows: close() releases the sessions for reuse inside
 * the heap, but the process RSS does not go down. Session creation also transiently builds each expert's
 * ModelProto (K*N*4 bytes) in JS and copies it into the heap. If the weights exceed MAX_INITIALIZER_BYTES the
 * peer falls back to feeding W as a graph input (see OrtPeerOptions.weightsAsInput).
 */
import { pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import * as ort from 'onnxruntime-web';
import { f32le, fBytes, fInt, fStr, msg, type Field } from './onnx_proto.js';

// The protobuf encoder lives in onnx_proto.ts (no ORT import there, so the WebGPU peer's bundle carries only
// ORT's webgpu build); re-exported for the peers that import it from here.
export { concat, f32le, fBytes, fInt, fStr, msg, type Field } from './onnx_proto.js';

export interface OrtPeer {
  /** Runs Y_g = X_g (M_g x K) * W_g (K x N) for every expert g with M_g > 0, sequentially, one session.run per expert. */
  run(x: Float32Array /* [totalM, K] row-major, experts' rows concatenated */, sizes: readonly number[], y: Float32Array /* [totalM, N] */): Promise<void>;
  close(): Promise<void>;
}

// ONNX field numbers (onnx/onnx.proto3).
const TENSOR_FLOAT = 1; // TensorProto.DataType.FLOAT

/** TypeProto{tensor_type: {elem_type: FLOAT, shape: dims}}; a string dim is a dim_param, a number a dim_value. */
function floatTensorType(dims: readonly (number | string)[]): Uint8Array {
  const shape = msg(
    ...dims.map((d) => fBytes(1 /* TensorShapeProto.dim */, typeof d === 'number' ? fInt(1 /* dim_value */, d) : fStr(2 /* dim_param */, d))),
  );
  const tensorType = msg(fInt(1 /* elem_type */, TENSOR_FLOAT), fBytes(2 /* shape */, shape));
  return msg(fBytes(1 /* TypeProto.tensor_type */, tensorType));
}

function valueInfo(name: string, dims: readonly (number | string)[]): Uint8Array {
  return msg(fStr(1 /* name */, name), fBytes(2 /* type */, floatTensorType(dims)));
}

/**
 * ModelProto bytes for `Y[m, N] = MatMul(X[m, K], W[K, N])`.
 * If `w` is given it is stored as an initializer (raw_data); otherwise W is a second graph input.
 */
export function buildMatMulModel(K: number, N: number, w: Float32Array | null): Uint8Array {
  const node = msg(
    fStr(1 /* input */, 'X'),
    fStr(1 /* input */, 'W'),
    fStr(2 /* output */, 'Y'),
    fStr(3 /* name */, 'matmul'),
    fStr(4 /* op_type */, 'MatMul'),
  );
  const graphFields: Field[] = [fBytes(1 /* node */, node), fStr(2 /* name */, 'expert_matmul')];
  if (w) {
    if (w.length !== K * N) throw new RangeError(`buildMatMulModel: W has ${w.length} elements, expected ${K * N}`);
    const tensor = msg(
      fInt(1 /* dims */, K),
      fInt(1 /* dims */, N),
      fInt(2 /* data_type */, TENSOR_FLOAT),
      fStr(8 /* name */, 'W'),
      fBytes(9 /* raw_data */, f32le(w)),
    );
    graphFields.push(fBytes(5 /* initializer */, tensor));
  }
  graphFields.push(fBytes(11 /* input */, valueInfo('X', ['m', K])));
  if (!w) graphFields.push(fBytes(11 /* input */, valueInfo('W', [K, N])));
  graphFields.push(fBytes(12 /* output */, valueInfo('Y', ['m', N])));
  const graph = msg(...graphFields);
  const opset = msg(fStr(1 /* domain */, ''), fInt(2 /* version */, 13));
  return msg(
    fInt(1 /* ir_version */, 8),
    fStr(2 /* producer_name */, 'groupdnn-ort-peer'),
    fBytes(7 /* graph */, graph),
    fBytes(8 /* opset_import */, opset),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// ORT-web initialisation (once per process).
// ---------------------------------------------------------------------------------------------------------------

let initThreads: number | null = null;

export function configureOrt(threads: number): void {
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`createOrtPeer: threads must be a positive integer, got ${threads}`);
  if (initThreads !== null) {
    if (initThreads !== threads) {
      throw new Error(
        `createOrtPeer: onnxruntime-web was already initialised with ${initThreads} thread(s) in this process; ` +
          `numThreads is process-global and cannot be changed (requested ${threads}). Use a separate process.`,
      );
    }
    return;
  }
  // Load the wasm binary and its emscripten glue from the npm package itself (no network / CDN).
  const require = createRequire(import.meta.url);
  const distDir = dirname(require.resolve('onnxruntime-web/ort-wasm-simd-threaded.wasm'));
  ort.env.wasm.wasmPaths = {
    mjs: pathToFileURL(join(distDir, 'ort-wasm-simd-threaded.mjs')),
    wasm: pathToFileURL(join(distDir, 'ort-wasm-simd-threaded.wasm')),
  };
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'error';
  initThreads = threads;
}

/** The thread count ORT-web actually initialised with (it falls back to 1, with a console warning, if wasm threads are unavailable). */
export function ortEffectiveThreads(): number {
  return ort.env.wasm.numThreads ?? 1;
}

export const ortVersion: string = ort.env.versions.web ?? ort.env.versions.common;

export const SESSION_OPTIONS: ort.InferenceSession.SessionOptions = {
  executionProviders: ['wasm'],
  graphOptimizationLevel: 'all',
};

// ---------------------------------------------------------------------------------------------------------------
// The peer.
// ---------------------------------------------------------------------------------------------------------------

/**
 * Heap budget for W initializers. All sessions share one wasm32 heap (max 4 GiB, which also has to hold ORT's
 * code data, arenas, and the per-run X/Y copies); above this, createOrtPeer falls back to weights-as-input.
 */
export const MAX_INITIALIZER_BYTES = 3 * 2 ** 30;

export interface OrtPeerOptions {
  /**
   * Force the fallback design: ONE session whose model is `Y = MatMul(X, W)` with W as a second graph input,
   * fed per run as a (JS-side zero-copy) view of the expert's weights. This is NOT what the primary peer
   * measures: ORT-web copies W_g (K*N*4 bytes) into the wasm heap on every run and MatMul cannot use prepacked
   * B, so it adds a weight copy + packing per expert per call. Default: used only if E*K*N*4 > MAX_INITIALIZER_BYTES.
   */
  weightsAsInput?: boolean;
}

/** weights: [E, K, N] row-major f32. threads: ORT intra-op threads. */
export async function createOrtPeer(
  weights: Float32Array,
  E: number,
  K: number,
  N: number,
  threads: number,
  options: OrtPeerOptions = {},
): Promise<OrtPeer> {
  if (weights.length !== E * K * N) throw new RangeError(`createOrtPeer: weights has ${weights.length} elements, expected E*K*N = ${E * K * N}`);
  configureOrt(threads);

  const weightsAsInput = options.weightsAsInput ?? E * K * N * 4 > MAX_INITIALIZER_BYTES;
  if (weightsAsInput && options.weightsAsInput === undefined) {
    console.warn(
      `createOrtPeer: ${((E * K * N * 4) / 2 ** 30).toFixed(2)} GiB of weights exceed the ${MAX_INITIALIZER_BYTES / 2 ** 30} GiB initializer budget for one wasm32 heap (4 GiB max); ` +
        'falling back to W as a per-run graph input (adds a K*N weight copy into the heap per expert per run).',
    );
  }

  const sessions: ort.InferenceSession[] = [];
  try {
    if (weightsAsInput) {
      sessions.push(await ort.InferenceSession.create(buildMatMulModel(K, N, null), SESSION_OPTIONS));
    } else {
      for (let g = 0; g < E; g++) {
        const model = buildMatMulModel(K, N, weights.subarray(g * K * N, (g + 1) * K * N));
        sessions.push(await ort.InferenceSession.create(model, SESSION_OPTIONS));
      }
    }
  } catch (err) {
    await Promise.all(sessions.map((s) => s.release()));
    throw err;
  }
  if (ortEffectiveThreads() !== threads) {
    await Promise.all(sessions.map((s) => s.release()));
    throw new Error(`createOrtPeer: requested ${threads} thread(s) but onnxruntime-web initialised with ${ortEffectiveThreads()}`);
  }

  let closed = false;
  return {
    async run(x: Float32Array, sizes: readonly number[], y: Float32Array): Promise<void> {
      if (closed) throw new Error('OrtPeer: run() after close()');
      if (sizes.length !== E) throw new RangeError(`OrtPeer.run: sizes has ${sizes.length} entries, expected E = ${E}`);
      let totalM = 0;
      for (const m of sizes) {
        if (!Number.isInteger(m) || m < 0) throw new RangeError(`OrtPeer.run: bad group size ${m}`);
        totalM += m;
      }
      if (x.length < totalM * K) throw new RangeError(`OrtPeer.run: x has ${x.length} elements, need ${totalM * K}`);
      if (y.length < totalM * N) throw new RangeError(`OrtPeer.run: y has ${y.length} elements, need ${totalM * N}`);

      let row = 0;
      for (let g = 0; g < E; g++) {
        const m = sizes[g];
        if (m === 0) continue;
        const feeds: Record<string, ort.Tensor> = { X: new ort.Tensor('float32', x.subarray(row * K, (row + m) * K), [m, K]) };
        if (weightsAsInput) feeds.W = new ort.Tensor('float32', weights.subarray(g * K * N, (g + 1) * K * N), [K, N]);
        const out = await sessions[weightsAsInput ? 0 : g].run(feeds);
        const yg = out.Y;
        y.set(yg.data as Float32Array, row * N);
        yg.dispose();
        row += m;
      }
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await Promise.all(sessions.map((s) => s.release()));
      sessions.length = 0;
    },
  };
}
