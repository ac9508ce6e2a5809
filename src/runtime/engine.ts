import { check } from '../common/status.js';
import { Heap } from './heap.js';

export interface EngineOptions {
  /** Compute threads: 1 runs kernels in the calling thread; N > 1 starts N workers. Default: 1 here (workers come with the wasm engine). */
  threads?: number;
  /** Initial heap size in bytes (grows on demand). Default 16 MiB. */
  initialBytes?: number;
  /** Heap limit in bytes; allocations beyond it fail with `out_of_memory`. Default and maximum 4 GiB - 64 KiB. */
  maxBytes?: number;
}

const PAGE = 65536;
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
  private released = false;

  protected constructor(threads: number, memory: WebAssembly.Memory, heap: Heap) {
    this.threads = threads;
    this.memory = memory;
    this.heap = heap;
  }

  static async create(options: EngineOptions = {}): Promise<Engine> {
    const threads = options.threads ?? 1;
    check(Number.isSafeInteger(threads) && threads >= 1 && threads <= 256, `Engine.create: threads must be an integer in [1, 256], got ${threads}`);
    const maxBytes = options.maxBytes ?? MAX_PAGES * PAGE;
    check(Number.isSafeInteger(maxBytes) && maxBytes > RESERVED_LOW_BYTES && maxBytes <= MAX_PAGES * PAGE, `Engine.create: maxBytes must be in (${RESERVED_LOW_BYTES}, ${MAX_PAGES * PAGE}], got ${maxBytes}`);
    const initialBytes = Math.min(options.initialBytes ?? 16 << 20, maxBytes);
    check(Number.isSafeInteger(initialBytes) && initialBytes > 0, `Engine.create: initialBytes must be a positive integer, got ${initialBytes}`);
    const memory = new WebAssembly.Memory({
      initial: Math.ceil(Math.max(initialBytes, RESERVED_LOW_BYTES + PAGE) / PAGE),
      maximum: Math.ceil(maxBytes / PAGE),
      shared: true,
    });
    return new Engine(threads, memory, new Heap(memory, RESERVED_LOW_BYTES, maxBytes));
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

  free(ptr: number): void {
    this.checkAlive();
    this.heap.release(ptr);
  }

  /** Stops the engine's workers. Memory objects of the engine must not be used afterwards. */
  release(): void {
    this.released = true;
  }

  get isReleased(): boolean {
    return this.released;
  }

  protected checkAlive(): void {
    check(!this.released, 'engine: used after release()');
  }
}
