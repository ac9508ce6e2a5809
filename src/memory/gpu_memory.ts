import { DnnlError, check } from '../common/status.js';
import { decodeArray, dtBytes, encodeArray, fromStored, isSubByteType, makeView, toStored } from '../common/data_type.js';
import type { GpuEngine } from '../runtime/gpu/gpu_engine.js';
import { RUNTIME_SIZE_VAL, type MemoryDesc } from './desc.js';
import { fromSizes } from './offsets.js';
import { countObject } from '../common/census.js';
import { checkOptionKeys, optionKeys } from '../common/option_keys.js';
import type { MemoryOptions } from './memory.js';

const GPU_MEMORY_OPTION_KEYS = optionKeys<MemoryOptions>({ capacityBytes: true });

/** A runtime-dims memory has no host-known element count (as the cpu engine's `Memory.values` says). */
const RUNTIME_VALUES = (op: string): string => `Memory.${op}: size depends on runtime dims; ${op} the plain memory (or GPUBuffer) the view was made over`;

/** What `GpuMemory.read()` returns: the natural array of the data type (decoded floats for 16-bit, 8-bit and 4-bit float/int codes). */
export type GpuReadArray = Float32Array | Int32Array | Int8Array | Uint8Array;

const round4 = (n: number): number => Math.ceil(n / 4) * 4;

/**
 * A memory object of a gpu engine: a descriptor plus `GPUBuffer`s (grouped descriptors: values and
 * offsets, both on the device; the same offsets buffer may back several objects). Host writes are
 * queued (`queue.writeBuffer`: ordered before every later submit, so `write` stays synchronous);
 * host reads map a copy after the queue's work and are therefore asynchronous.
 */
export class GpuMemory {
  readonly desc: MemoryDesc;
  readonly engine: GpuEngine;
  /** The device buffers: [values] or [values, offsets]. */
  readonly buffers: readonly GPUBuffer[];
  /** Usable bytes of each buffer (a caller's buffer may be larger than the descriptor needs). */
  readonly byteSizes: readonly number[];
  private readonly owned: readonly boolean[];
  private freed = false;
  /** @internal set by a reorder into a packed layout: executing with never-filled packed weights is refused. */
  filled: boolean;

  private constructor(desc: MemoryDesc, engine: GpuEngine, buffers: GPUBuffer[], byteSizes: number[], owned: boolean[]) {
    this.desc = desc;
    this.engine = engine;
    this.buffers = Object.freeze(buffers);
    this.byteSizes = Object.freeze(byteSizes);
    this.owned = Object.freeze(owned);
    this.filled = desc.format !== 'packed';
  }

  /**
   * Allocates every buffer on the device, or wraps the caller's (`[values, offsets]` for grouped;
   * `undefined` allocates that one). A grouped desc with per-group sizes gets its offsets written.
   */
  static create(desc: MemoryDesc, engine: GpuEngine, buffers?: GPUBuffer | readonly (GPUBuffer | undefined)[], options: MemoryOptions = {}): GpuMemory {
    const fn = 'Memory.create';
    engine.checkAlive();
    checkOptionKeys(fn, options, GPU_MEMORY_OPTION_KEYS);
    const cap = options.capacityBytes;
    if (cap !== undefined) check(Number.isSafeInteger(cap) && cap >= 0, `${fn}: capacityBytes must be a non-negative integer, got ${cap}`);
    check(desc.format !== 'any', `${fn}: cannot create memory for a 'tag.any' descriptor; query the pd for the chosen one`);
    const list = buffers === undefined ? [] : Array.isArray(buffers) ? [...buffers] : [buffers as GPUBuffer];
    check(list.length <= desc.bufferCount, `${fn}: ${desc.bufferCount} buffer(s) expected, got ${list.length}`);
    check(cap === undefined || desc.getSize(0) === RUNTIME_SIZE_VAL, capacityWithoutRuntimeDims(fn, desc));
    const out: GPUBuffer[] = [], sizes: number[] = [], owned: boolean[] = [];
    try {
      for (let i = 0; i < desc.bufferCount; i++) {
        const bytes = desc.getSize(i);
        const b = list[i];
        if (b === undefined) {
          // A runtime-rows values buffer of its own: { capacityBytes } (a Proposal #3 expert's src / dst)
          const own = bytes === RUNTIME_SIZE_VAL && i === 0 && cap !== undefined ? Math.max(4, Math.ceil(cap / 4) * 4) : undefined;
          check(bytes !== RUNTIME_SIZE_VAL || own !== undefined, `${fn}: buffer ${i} size depends on runtime dims; pass a GPUBuffer${i === 0 ? ', or { capacityBytes } to allocate that many bytes' : ''}`);
          out.push(engine.createBuffer(own ?? bytes, `${fn}: buffer ${i}`));
          sizes.push(own !== undefined ? cap! : bytes); // the capacity the rows are checked against
          owned.push(true);
          continue;
        }
        check(typeof (b as Partial<GPUBuffer>).getMappedRange === 'function', `${fn}: buffer ${i} must be a GPUBuffer of the engine's device`);
        check((b.usage & GPUBufferUsage.STORAGE) !== 0, `${fn}: buffer ${i} needs GPUBufferUsage.STORAGE`);
        const need = bytes === RUNTIME_SIZE_VAL ? 0 : bytes, has = engine.bytesOf(b);
        check(has >= need, `${fn}: buffer ${i} has ${has} bytes, the descriptor needs ${need}`);
        // with a buffer, capacityBytes bounds the runtime rows as on the cpu engine
        if (i === 0 && cap !== undefined) check(cap <= has, `${fn}: capacityBytes ${cap} exceeds buffer 0's ${has} bytes`);
        out.push(b);
        sizes.push(bytes === RUNTIME_SIZE_VAL ? (i === 0 && cap !== undefined ? cap : has) : bytes);
        owned.push(false);
      }
    } catch (e) {
      out.forEach((b, i) => owned[i] && b.destroy());
      throw e;
    }
    const mem = new GpuMemory(desc, engine, out, sizes, owned);
    countObject('memory');
    const g = desc.grouped;
    if (g?.groupSizes && list[1] === undefined) mem.writeOffsets(fromSizes(g.groupSizes, new Int32Array(g.groupCount + 1)));
    return mem;
  }

  /**
   * @internal `m`'s engine seen with another descriptor and buffers, owning nothing (no checks, not counted): an
   * executor's view of its workspace. A new object of GpuMemory's own shape, unlike an `Object.create(m)` view,
   * which turns `m` into a V8 prototype (slow-mode: every later property read of it slower).
   */
  static view(m: GpuMemory, desc: MemoryDesc, buffers: GPUBuffer[], byteSizes: number[]): GpuMemory {
    return new GpuMemory(desc, m.engine, buffers, byteSizes, buffers.map(() => false));
  }

  /** Same meaning as the cpu `Memory.handles`: the buffers, for sharing an offsets buffer between src and dst. */
  get handles(): readonly GPUBuffer[] {
    return this.buffers;
  }

  get isFreed(): boolean {
    return this.freed;
  }

  /** Elements `write` takes and `read` returns: the whole values span, padding of strided layouts included. */
  get elementCount(): number {
    return this.desc.format === 'packed' ? 0 : this.desc.spanElems;
  }

  /** Queues a copy of logical values into the values buffer, converted as the cpu `Memory.write` does. */
  write(data: ArrayLike<number>): this {
    this.checkAlive('write');
    check(this.desc.format !== 'packed', `Memory.write: ${this.desc.packed?.name ?? 'packed'} is a packed layout: fill it with reorder`);
    check(this.desc.getSize(0) !== RUNTIME_SIZE_VAL, RUNTIME_VALUES('write'));
    const t = this.desc.dataType, n = this.elementCount;
    check(data.length === n, `Memory.write: expected ${n} values, got ${data.length}`);
    const bytes = new ArrayBuffer(round4(dtBytes(t, n)));
    if (isSubByteType(t)) new Uint8Array(bytes).set(encodeArray(t, data));
    else {
      const v = makeView(t, bytes, 0, t === 'f32' || t === 's32' || t === 'bf16' || t === 'f16' || t === 's8' || t === 'u8' ? n : dtBytes(t, n));
      if (t === 'f32') v.set(data);
      else for (let i = 0; i < n; i++) v[i] = toStored(t, data[i]);
    }
    this.engine.write(this.buffers[0], 0, bytes);
    return this;
  }

  /** Queues raw bytes into buffer `index` (0 values, 1 offsets) at `byteOffset` (a multiple of 4). */
  writeBytes(bytes: Uint8Array, index = 0, byteOffset = 0): this {
    this.checkAlive('writeBytes');
    check(index >= 0 && index < this.buffers.length, `Memory.writeBytes: buffer index ${index} out of range`);
    check(byteOffset % 4 === 0, `Memory.writeBytes: byteOffset must be a multiple of 4, got ${byteOffset}`);
    check(byteOffset + bytes.length <= this.buffers[index].size, `Memory.writeBytes: ${bytes.length} bytes at ${byteOffset} exceed the buffer's ${this.buffers[index].size}`);
    const copy = new Uint8Array(round4(bytes.length));
    copy.set(bytes);
    this.engine.write(this.buffers[index], byteOffset, copy.buffer);
    return this;
  }

  /** Queues the G+1 offsets of a grouped memory (`[0, M0, M0+M1, ...]`; see `offsets.from*`). */
  writeOffsets(offs: ArrayLike<number>): this {
    this.checkAlive('writeOffsets');
    const g = this.desc.grouped;
    check(g !== undefined, 'Memory.writeOffsets: only grouped memory has an offsets buffer');
    check(offs.length === g.groupCount + 1, `Memory.writeOffsets: expected ${g.groupCount + 1} offsets (G + 1), got ${offs.length}`);
    this.engine.write(this.buffers[1], 0, Int32Array.from(offs).buffer);
    return this;
  }

  /** Raw bytes of buffer `index`, after the work queued so far. */
  async readBytes(index = 0): Promise<Uint8Array> {
    this.checkAlive('readBytes');
    check(index >= 0 && index < this.buffers.length, `Memory.readBytes: buffer index ${index} out of range`);
    const n = this.byteSizes[index];
    const dev = this.engine.device;
    const size = Math.max(4, round4(n));
    const rb = dev.createBuffer({ label: 'groupdnn read-back', size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.engine.encode('Memory.read', (enc) => enc.copyBufferToBuffer(this.buffers[index], 0, rb, 0, Math.min(size, this.buffers[index].size)));
    this.engine.submit();
    try {
      await rb.mapAsync(GPUMapMode.READ);
    } catch (e) {
      rb.destroy();
      throw new DnnlError('runtime_error', `Memory.read: mapping the read-back buffer failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    const out = new Uint8Array(rb.getMappedRange().slice(0, n));
    rb.unmap();
    rb.destroy();
    return out;
  }

  /** The values as their natural array (f32, s32, s8, u8 as stored; every other type decoded to f32), after the work queued so far. */
  async read(): Promise<GpuReadArray> {
    check(this.desc.format !== 'packed', 'Memory.read: a packed layout has no logical values; reorder it into a plain memory first');
    check(this.desc.getSize(0) !== RUNTIME_SIZE_VAL, RUNTIME_VALUES('read'));
    const t = this.desc.dataType, n = this.elementCount;
    const bytes = await this.readBytes(0);
    if (isSubByteType(t) || t === 'f8_e4m3' || t === 'f8_e5m2' || t === 'e8m0') return decodeArray(t, bytes, n);
    const v = makeView(t, bytes.buffer, 0, n);
    if (t === 'f32' || t === 's32' || t === 's8' || t === 'u8') return v as GpuReadArray;
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = fromStored(t, v[i]);
    return out;
  }

  /** The G+1 offsets of a grouped memory, after the work queued so far. */
  async readOffsets(): Promise<Int32Array> {
    check(this.desc.isGrouped, 'Memory.readOffsets: only grouped memory has an offsets buffer');
    const b = await this.readBytes(1);
    return new Int32Array(b.buffer, 0, (this.desc.grouped?.groupCount ?? 0) + 1);
  }

  /** Destroys the buffers this object allocated (never the caller's), once the queued work is done. */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    // Recorded, not yet submitted commands may use the buffers: the engine destroys them after its next submit.
    if (!this.engine.isReleased) this.engine.retire(...this.buffers.filter((_, i) => this.owned[i]));
  }

  [Symbol.dispose](): void {
    this.free();
  }

  private checkAlive(what: string): void {
    if (this.freed) throw new DnnlError('invalid_arguments', `Memory.${what}: memory object used after free()`);
    this.engine.checkAlive();
  }
}

/** The rule for `{ capacityBytes }`: it bounds (or, without handle 0, sizes) a runtime-rows buffer, nothing else. */
export function capacityWithoutRuntimeDims(fn: string, desc: MemoryDesc): string {
  return `${fn}: capacityBytes applies to a buffer whose size depends on runtime dims; this descriptor's buffer 0 has a known size (${desc.getSize(0)} bytes)`;
}
