import { check } from '../common/status.js';
import { checkOptionKeys, optionKeys } from '../common/option_keys.js';
import { Heap } from './heap.js';
import { CTRL } from './control_block.js';
import { instantiate, loadKernels, relaxedSimdNative, resolveIsa, type KernelChoice, type KernelExports, type KernelIsa } from './wasm_kernels.js';
import { WorkerPool } from './worker_pool.js';
import { GpuEngine, type GpuEngineOptions } from './gpu/gpu_engine.js';

export interface EngineOptions {
  /** Engine kind: 'cpu' (default: wasm kernels in workers); `{ kind: 'gpu' }` takes GpuEngineOptions. */
  kind?: 'cpu';
  /** Compute threads: 1 runs kernels in the calling thread; N > 1 starts N workers. Default: one per core. */
  threads?: number;
  /** Kernel build: 'auto' (relaxed SIMD when the runtime has it on, else SIMD128), 'simd128', 'relaxed', or 'none' (reference only). */
  kernels?: KernelChoice;
  /** Initial heap size in bytes (grows on demand). Default 16 MiB. */
  initialBytes?: number;
  /** Heap limit in bytes; allocations beyond it fail with `out_of_memory`. Default and maximum 4 GiB - 64 KiB. */
  maxBytes?: number;
  /** Workers that are not all loaded and initialised within this many ms reject `Engine.create` (default 10000). */
  startTimeoutMs?: number;
  /**
   * Let the integer kernels (dynamic int8 activations x 4-bit weights, 1-row tiles) use relaxed SIMD's
   * `i32x4.relaxed_dot_i8x16_i7x16_add_s` where relaxed SIMD is native (never on Node 20, which computes
   * it wrong). Default false: on x64 without VNNI V8 lowers it to three instructions and the SIMD128 int16
   * kernel was faster (decode w4:dq 8.0 ms without, 10.6-11.1 ms with, Node 24, AMD EPYC without VNNI);
   * try it on CPUs with AVX-VNNI or Arm dot products. Results are the same bits either way. (The 1-2 row tiles of s4 / u4 /
   * f4_e2m1 codes use `i16x8.relaxed_dot_i8x16_i7x16_s` wherever relaxed SIMD is native, without this option: one instruction on x64.)
   */
  relaxedDot?: boolean;
}

const ENGINE_OPTION_KEYS = optionKeys<EngineOptions>({ kind: true, threads: true, kernels: true, initialBytes: true, maxBytes: true, startTimeoutMs: true, relaxedDot: true });

const PAGE = 65536;
/** Stack of each kernel instance (main thread and every worker). */
const STACK_BYTES = 256 << 10;

async function defaultThreads(): Promise<number> {
  const nav = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator;
  let n = nav?.hardwareConcurrency;
  if (n === undefined && (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node) {
    const os = await import('node:os');
    n = os.availableParallelism();
  }
  return Math.max(1, Math.min(n ?? 1, 64));
}
const MAX_PAGES = 65535;
/** Bytes kept at the bottom of the heap for the kernels' static data. */
export const RESERVED_LOW_BYTES = 1 << 20;

/**
 * An engine owns one shared `WebAssembly.Memory` (the "device" memory) and the allocator over it.
 * Memory objects are regions of this heap; primitives created on an engine only touch its heap.
 */
export class Engine {
  readonly kind = 'cpu' as const;
  readonly threads: number;
  readonly memory: WebAssembly.Memory;
  readonly heap: Heap;
  /** The kernel build in use, or undefined when the engine runs the reference only. */
  readonly isa: KernelIsa | undefined;
  /** @internal kernels instantiated in the calling thread (threads = 1, packing, benchmarks). */
  readonly kernels: KernelExports | undefined;
  /** @internal the workers (threads > 1). */
  readonly pool: WorkerPool | undefined;
  private released = false;
  /** Stream work enqueued and not finished; frees wait for it (a job may still read or write the block). */
  private outstanding = 0;
  private deferred: number[] = [];
  private idleWaiters: (() => void)[] = [];
  private scratchPtr = 0;
  private scratchStride = 0;

  protected constructor(threads: number, memory: WebAssembly.Memory, heap: Heap, isa: KernelIsa | undefined, kernels: KernelExports | undefined, pool: WorkerPool | undefined) {
    this.threads = threads;
    this.memory = memory;
    this.heap = heap;
    this.isa = isa;
    this.kernels = kernels;
    this.pool = pool;
  }

  /**
   * `Engine.create()` / `Engine.create({ threads })`: the cpu engine; `Engine.create({ kind: 'gpu' })`:
   * the WebGPU engine (optionally on the caller's `device`). The same pds and primitives run on both.
   */
  static create(options: GpuEngineOptions): Promise<GpuEngine>;
  static create(options?: EngineOptions): Promise<Engine>;
  static async create(options: EngineOptions | GpuEngineOptions = {}): Promise<Engine | GpuEngine> {
    if (options.kind === 'gpu') return GpuEngine.create(options);
    check(options.kind === undefined || options.kind === 'cpu', `Engine.create: kind must be 'cpu' or 'gpu', got '${String(options.kind)}'`);
    return Engine.createCpu(options);
  }

  private static async createCpu(options: EngineOptions): Promise<Engine> {
    checkOptionKeys('Engine.create', options, ENGINE_OPTION_KEYS);
    const canShare = typeof SharedArrayBuffer !== 'undefined' && (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated !== false;
    // Without cross-origin isolation a page has no SharedArrayBuffer: one thread, or a clear refusal if more were asked for.
    check(options.threads === undefined || options.threads === 1 || canShare, `Engine.create: threads = ${options.threads} needs SharedArrayBuffer (a cross-origin isolated page: COOP same-origin + COEP require-corp); use threads: 1 or leave threads unset`);
    const threads = options.threads ?? (canShare ? await defaultThreads() : 1);
    const startTimeoutMs = options.startTimeoutMs ?? 10_000;
    check(Number.isFinite(startTimeoutMs) && startTimeoutMs > 0, `Engine.create: startTimeoutMs must be a positive number, got ${startTimeoutMs}`);
    check(options.relaxedDot === undefined || typeof options.relaxedDot === 'boolean', `Engine.create: relaxedDot must be a boolean, got ${String(options.relaxedDot)}`);
    check(Number.isSafeInteger(threads) && threads >= 1 && threads <= 256, `Engine.create: threads must be an integer in [1, 256], got ${threads}`);
    const maxBytes = options.maxBytes ?? MAX_PAGES * PAGE;
    check(Number.isSafeInteger(maxBytes) && maxBytes > RESERVED_LOW_BYTES && maxBytes <= MAX_PAGES * PAGE, `Engine.create: maxBytes must be in (${RESERVED_LOW_BYTES}, ${MAX_PAGES * PAGE}], got ${maxBytes}`);
    const initialBytes = Math.min(options.initialBytes ?? 16 << 20, maxBytes);
    check(Number.isSafeInteger(initialBytes) && initialBytes > 0, `Engine.create: initialBytes must be a positive integer, got ${initialBytes}`);
    const memory = new WebAssembly.Memory({
      initial: Math.ceil(Math.max(initialBytes, RESERVED_LOW_BYTES + PAGE) / PAGE),
      maximum: Math.ceil(maxBytes / PAGE),
      shared: canShare,
    });
    const heap = new Heap(memory, RESERVED_LOW_BYTES, maxBytes);
    const choice = options.kernels ?? 'auto';
    check(['auto', 'simd128', 'relaxed', 'none'].includes(choice), `Engine.create: kernels must be 'auto', 'simd128', 'relaxed' or 'none', got '${String(choice)}'`);
    // The kernels import shared memory, which needs SharedArrayBuffer: without it only the reference runs.
    check(canShare || choice === 'auto' || choice === 'none', `Engine.create: kernels '${choice}' need SharedArrayBuffer (a cross-origin isolated page); without it use kernels 'auto' (the reference implementation) or 'none'`);
    const isa = canShare ? resolveIsa(choice) : undefined;
    if (!isa) return new Engine(threads, memory, heap, undefined, undefined, undefined);
    const module = await loadKernels(isa);
    const stackTop = (): number => heap.alloc(STACK_BYTES, 'kernel stack') + STACK_BYTES;
    const kernels = await instantiate(module, memory, stackTop());
    // The relaxed dot only on request and where relaxed SIMD is native (the flag is in the shared memory:
    // workers see it).
    // bit 0: the opt-in i32x4 relaxed dot; bit 1: the i16x8 one of the 1-2 row `:dq` tiles of x4 and f4 codes
    // (faster than SIMD128's int16 dots on x64 without VNNI too), wherever relaxed SIMD is native. Both are probed
    // exact before use.
    const native = isa === 'relaxed' && relaxedSimdNative();
    kernels.set_relaxed_dot((native && options.relaxedDot === true ? 1 : 0) | (native ? 2 : 0));
    check((kernels.__heap_base.value as number) <= RESERVED_LOW_BYTES, 'engine: kernel static data exceeds the reserved low memory');
    let pool: WorkerPool | undefined;
    if (threads > 1) {
      const ctrlPtr = heap.alloc(CTRL.INTS * 4, 'control block');
      new Int32Array(memory.buffer, ctrlPtr, CTRL.INTS).fill(0);
      pool = new WorkerPool(threads, module, memory, ctrlPtr, Array.from({ length: threads }, stackTop), startTimeoutMs);
      await pool.start();
    }
    return new Engine(threads, memory, heap, isa, kernels, pool);
  }

  /** @internal per-thread kernel scratch of at least `bytesPerThread`; call only while no job runs. */
  scratch(bytesPerThread: number): { ptr: number; stride: number } {
    const stride = Math.ceil(bytesPerThread / 64) * 64;
    if (stride > this.scratchStride) {
      if (this.scratchPtr) this.heap.release(this.scratchPtr);
      this.scratchPtr = 0;
      this.scratchPtr = this.heap.alloc(stride * this.threads, 'kernel scratch');
      this.scratchStride = stride;
    }
    return { ptr: this.scratchPtr, stride: this.scratchStride };
  }

  /** The current buffer of the heap (a new object after growth; earlier views stay valid). */
  get buffer(): SharedArrayBuffer {
    return this.memory.buffer as unknown as SharedArrayBuffer;
  }

  /** Allocates `bytes` in the heap (64-byte aligned); returns the byte address (a "handle"). */
  alloc(bytes: number): number {
    this.checkAlive();
    return this.heap.alloc(bytes);
  }

  /**
   * Gives a block back. While stream work is in flight the block is only marked: it returns to the
   * heap when that work is done, so a job never writes into memory allocated after it was enqueued.
   */
  free(ptr: number): void {
    this.checkAlive();
    this.releaseBlock(ptr);
  }

  /** @internal `free` for cleanups that may run after `release()` (destroy, FinalizationRegistry): then a no-op. */
  releaseBlock(ptr: number): void {
    if (this.released) return;
    if (this.outstanding > 0) this.deferred.push(ptr);
    else this.heap.release(ptr);
  }

  /** @internal a stream enqueued work. */
  beginWork(): void {
    this.outstanding++;
  }

  /** @internal a stream's work finished (or failed). */
  endWork(): void {
    if (--this.outstanding > 0) return;
    const d = this.deferred;
    this.deferred = [];
    if (!this.released) for (const p of d) this.heap.release(p);
    // release() with work pending: the workers stop once that work is done.
    else this.pool?.close();
    const w = this.idleWaiters;
    this.idleWaiters = [];
    for (const f of w) f();
  }

  /**
   * @internal an allocation by stream work that was enqueued before `release()` (a workspace that grows
   * at run time): allowed until that work is done, refused like `alloc` otherwise.
   */
  allocForWork(bytes: number): number {
    check(!this.released || this.outstanding > 0, 'engine: used after release()');
    return this.heap.alloc(bytes);
  }

  /** Resolves when no stream work is in flight on this engine. */
  idle(): Promise<void> {
    if (this.outstanding === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Releases the engine: from now on nothing new may use it (creating pds, primitives, streams or
   * memory, executing: `engine: used after release()`). Work already enqueued on its streams still runs
   * to the end, as a freed block stays reserved for the job that uses it: the workers stop once that
   * work is done, and `stream.wait()` resolves (or rejects with that work's own errors) as it would
   * have without the release. Memory objects of the engine must not be used afterwards.
   */
  release(): void {
    this.released = true;
    if (this.outstanding === 0) this.pool?.close();
  }

  /** `await using eng = await Engine.create()`: waits for in-flight work, then releases. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.idle();
    this.release();
  }

  get isReleased(): boolean {
    return this.released;
  }

  protected checkAlive(): void {
    check(!this.released, 'engine: used after release()');
  }
}
