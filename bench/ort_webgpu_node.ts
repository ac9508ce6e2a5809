/**
 * onnxruntime-web's WebGPU execution provider in Node: `onnxruntime-web/webgpu` (1.30: its native C++ WebGPU
 * EP compiled to wasm with asyncify, `ort-wasm-simd-threaded.asyncify.wasm`) on Dawn's Node bindings (the
 * `webgpu` package) standing in for a browser's `navigator.gpu`. Three things make it run:
 *  - `globalThis.navigator.gpu` = Dawn's GPU, and the WebGPU globals (GPUBufferUsage, ...) ORT's glue reads;
 *  - `GPUQueue.prototype.writeBuffer` copies views of a SharedArrayBuffer into a plain buffer first: ORT's
 *    wasm heap is shared memory and dawn.node answers "Invalid argument" to such views;
 *  - `--liftoff-only` for V8 before ORT's 27 MB wasm is compiled (`v8.setFlagsFromString`): otherwise V8
 *    TurboFan-compiles it in the background, and Node's event loop, when ORT waits for a GPU read-back,
 *    drains those background tasks before it polls Dawn again. On a loaded 2-core machine the first
 *    read-back of a QMoE run took 4.5 minutes that way (with the flag, 27 s including SwiftShader's shader
 *    compiles). Optional where cores are free (`liftoffOnly: false`); it slows ORT's CPU-side code.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import * as ort from 'onnxruntime-web/webgpu';

export interface OrtWebGpuOptions {
  /** V8's `--liftoff-only` (see above). Default true. */
  readonly liftoffOnly?: boolean;
  /** Directory holding `ort-wasm-simd-threaded.asyncify.wasm`; default: beside this module (a bundle) or ORT's package. */
  readonly wasmDir?: string;
  /** ORT's default logger level (read once, at ORT's init); sessions choose their own (describeOrtMoeGpu: verbose). */
  readonly logLevel?: 'verbose' | 'info' | 'warning' | 'error';
}

interface DawnModule {
  create(flags: string[]): GPU;
  globals: Record<string, unknown>;
}

let installed: GPU | undefined;

/** Makes `navigator.gpu` Dawn's and prepares ORT's WebGPU build; once per process. Returns the GPU object. */
export async function installOrtWebGpu(opts: OrtWebGpuOptions = {}): Promise<GPU> {
  if (installed) return installed;
  if (opts.liftoffOnly ?? true) setFlagsFromString('--liftoff-only');
  // A variable specifier keeps esbuild from bundling the native addon: the `webgpu` package is resolved at
  // run time (node_modules beside the bundle on the device machine).
  const name = 'webgpu';
  const dawn = (await import(/* @vite-ignore */ name)) as DawnModule;
  const g = globalThis as Record<string, unknown>;
  for (const [k, v] of Object.entries(dawn.globals)) if (g[k] === undefined) g[k] = v;
  const gpu = dawn.create([]);
  // Node 20 has no navigator; Node 21+ has one whose gpu is absent.
  const nav = (g.navigator ?? {}) as Record<string, unknown>;
  Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true });
  if (g.navigator === undefined) g.navigator = nav;
  wrapWriteBuffer(dawn.globals.GPUQueue as { prototype: GPUQueue });
  const dir = opts.wasmDir ?? defaultWasmDir();
  // The bytes themselves: the glue inside ORT's bundled build (what esbuild takes) is the browser flavour,
  // which would fetch() a file: URL, and Node's fetch refuses those. Unbundled, ORT's own Node glue reads it.
  if (dir) ort.env.wasm.wasmBinary = readFileSync(join(dir, WASM));
  ort.env.wasm.numThreads = 1; // the bundled glue would start this whole script as its pthread workers
  ort.env.wasm.proxy = false;
  ort.env.logLevel = opts.logLevel ?? 'warning';
  installed = gpu;
  return gpu;
}

/** Beside this module when the wasm was copied there (the esbuild bundle); else ORT's default (its package, unbundled). */
function defaultWasmDir(): string | undefined {
  const here = fileURLToPath(new URL('.', import.meta.url));
  return existsSync(join(here, WASM)) ? here : undefined;
}

const WASM = 'ort-wasm-simd-threaded.asyncify.wasm';

type WriteBuffer = (buffer: GPUBuffer, offset: number, data: BufferSource | SharedArrayBuffer, dataOffset?: number, size?: number) => void;

function wrapWriteBuffer(queueClass: { prototype: GPUQueue }): void {
  const proto = queueClass.prototype as unknown as { writeBuffer: WriteBuffer };
  const original = proto.writeBuffer;
  proto.writeBuffer = function (this: GPUQueue, buffer, offset, data, dataOffset, size) {
    if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer) {
      // Same element type and length, in a plain ArrayBuffer: dataOffset / size keep their meaning (elements).
      const copy = new (data.constructor as new (n: number) => ArrayBufferView)(data.byteLength / bytesPerElement(data));
      new Uint8Array(copy.buffer).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      return original.call(this, buffer, offset, copy as BufferSource, dataOffset, size);
    }
    if (data instanceof SharedArrayBuffer) return original.call(this, buffer, offset, new Uint8Array(data).slice().buffer, dataOffset, size);
    return original.call(this, buffer, offset, data, dataOffset, size);
  } as WriteBuffer;
}

function bytesPerElement(v: ArrayBufferView): number {
  return (v as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1;
}
