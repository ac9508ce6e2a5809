import { DnnlError } from '../common/status.js';

const PAGE = 65536;
/** Allocations are aligned to a cache line: SIMD loads never split lines at a block start. */
export const HEAP_ALIGN = 64;

/**
 * First-fit allocator over a shared `WebAssembly.Memory`. Blocks are aligned to 64 bytes, freed blocks
 * are coalesced and reused, and the memory grows on demand up to its maximum (then `out_of_memory`).
 * Shared memory never detaches on growth, so typed-array views handed out earlier stay valid.
 */
export class Heap {
  readonly memory: WebAssembly.Memory;
  readonly maxBytes: number;
  /** Free blocks sorted by address: [start, size]. */
  private free: Array<[number, number]> = [];
  private live = new Map<number, number>();
  /** Bytes asked for per live block (its size is that rounded up to HEAP_ALIGN). */
  private asked = new Map<number, number>();
  private liveSorted: number[] | undefined;
  private top: number;

  constructor(memory: WebAssembly.Memory, base: number, maxBytes: number) {
    this.memory = memory;
    this.maxBytes = maxBytes;
    this.top = alignUp(base, HEAP_ALIGN);
  }

  get byteLength(): number {
    return this.memory.buffer.byteLength;
  }

  /** Bytes currently allocated (live blocks). */
  get usedBytes(): number {
    let s = 0;
    for (const v of this.live.values()) s += v;
    return s;
  }

  alloc(bytes: number, what = 'buffer'): number {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new DnnlError('invalid_arguments', `alloc: ${what} size must be a non-negative integer, got ${bytes}`);
    const size = alignUp(Math.max(bytes, 1), HEAP_ALIGN);
    for (let i = 0; i < this.free.length; i++) {
      const [start, fsize] = this.free[i];
      if (fsize >= size) {
        if (fsize === size) this.free.splice(i, 1);
        else this.free[i] = [start + size, fsize - size];
        return this.track(start, size, bytes);
      }
    }
    const start = this.top;
    const end = start + size;
    if (end > this.maxBytes) {
      throw new DnnlError('out_of_memory', `alloc: ${what} of ${bytes} bytes does not fit: engine heap limit is ${this.maxBytes} bytes, ${this.usedBytes} in use`);
    }
    if (end > this.byteLength) {
      const want = Math.max(end, Math.min(this.maxBytes, this.byteLength * 1.5));
      const pages = Math.ceil((want - this.byteLength) / PAGE);
      try {
        this.memory.grow(pages);
      } catch {
        throw new DnnlError('out_of_memory', `alloc: ${what} of ${bytes} bytes: the engine heap could not grow to ${end} bytes`);
      }
    }
    this.top = end;
    return this.track(start, size, bytes);
  }

  /** Releases a block returned by `alloc`; freeing twice or a foreign pointer is an error. */
  release(ptr: number): void {
    const size = this.live.get(ptr);
    if (size === undefined) throw new DnnlError('invalid_arguments', `free: 0x${ptr.toString(16)} is not a live allocation of this engine`);
    this.live.delete(ptr);
    this.asked.delete(ptr);
    this.liveSorted = undefined;
    if (ptr + size === this.top) {
      this.top = ptr;
      // Pull the top down over any free block that now touches it.
      const last = this.free[this.free.length - 1];
      if (last && last[0] + last[1] === this.top) {
        this.top = last[0];
        this.free.pop();
      }
      return;
    }
    let i = 0;
    while (i < this.free.length && this.free[i][0] < ptr) i++;
    this.free.splice(i, 0, [ptr, size]);
    // Coalesce with the next and previous neighbours.
    if (i + 1 < this.free.length && this.free[i][0] + this.free[i][1] === this.free[i + 1][0]) {
      this.free[i][1] += this.free[i + 1][1];
      this.free.splice(i + 1, 1);
    }
    if (i > 0 && this.free[i - 1][0] + this.free[i - 1][1] === this.free[i][0]) {
      this.free[i - 1][1] += this.free[i][1];
      this.free.splice(i, 1);
    }
  }

  isLive(ptr: number): boolean {
    return this.live.has(ptr);
  }

  /**
   * The live block containing [ptr, ptr + bytes), or undefined; `size` is the bytes its `alloc` asked
   * for, not the aligned size: the padding after them belongs to no memory object.
   */
  owningBlock(ptr: number, bytes: number): { start: number; size: number } | undefined {
    if (!this.liveSorted) this.liveSorted = [...this.live.keys()].sort((a, b) => a - b);
    const s = this.liveSorted;
    let lo = 0;
    let hi = s.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (s[mid] <= ptr) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    if (found < 0) return undefined;
    const start = s[found];
    const size = this.asked.get(start) as number;
    return ptr + bytes <= start + size ? { start, size } : undefined;
  }

  private track(start: number, size: number, bytes: number): number {
    this.live.set(start, size);
    this.asked.set(start, bytes);
    this.liveSorted = undefined;
    return start;
  }
}

export function alignUp(x: number, a: number): number {
  return Math.ceil(x / a) * a;
}
