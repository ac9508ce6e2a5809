import { DnnlError, check } from '../common/status.js';
import { checkOptionKeys, optionKeys } from '../common/option_keys.js';
import { decodeArray, dtBytes, encodeArray, fromStored, isSubByteType, makeView, toStored, type ValuesView } from '../common/data_type.js';
import type { Engine } from '../runtime/engine.js';
import type { GpuEngine } from '../runtime/gpu/gpu_engine.js';
import { GpuMemory, capacityWithoutRuntimeDims } from './gpu_memory.js';
import { RUNTIME_SIZE_VAL, type MemoryDesc } from './desc.js';
import { fromSizes } from './offsets.js';
import { markPackedEmpty, markPackedFilled } from './packed_fill.js';
import { countObject } from '../common/census.js';

/** A buffer address in the engine heap (what oneDNN calls a handle). */
export type Handle = number;

/** What `Memory.read()` returns: the natural host array of the data type (see `read`). */
export type HostArray = Float32Array | Int32Array | Int8Array | Uint8Array;

export interface MemoryOptions {
  /**
   * Bytes usable from handle 0 of a descriptor with runtime dims (`[RUNTIME_DIM_VAL, K]`, e.g. a
   * Proposal #3 expert's src / dst): runtime sizes are checked against it. With a handle it bounds a view
   * over part of a buffer; without one, `Memory.create` allocates that many bytes (an expert's own buffer).
   */
  capacityBytes?: number;
}

const MEMORY_OPTION_KEYS = optionKeys<MemoryOptions>({ capacityBytes: true });

/**
 * A memory object: a descriptor plus its buffers in the engine heap. Grouped descriptors have two
 * buffers, values and offsets; the same offsets buffer may back several objects (src and dst).
 */
export class Memory {
  readonly desc: MemoryDesc;
  readonly engine: Engine;
  /** Byte addresses of the buffers in the engine heap: [values] or [values, offsets]. */
  readonly handles: readonly Handle[];
  private readonly owned: readonly boolean[];
  private freed = false;
  /** Bytes usable from handle 0 when set explicitly (views); otherwise up to the end of its allocation. */
  readonly capacityBytes: number | undefined;
  private valuesView: ValuesView | undefined;
  private offsetsView: Int32Array | undefined;
  /** Stream tasks enqueued with this memory as an argument and not settled yet (Stream.enqueue). */
  private streamUses = 0;

  private constructor(desc: MemoryDesc, engine: Engine, handles: Handle[], owned: boolean[], capacityBytes?: number) {
    this.desc = desc;
    this.capacityBytes = capacityBytes;
    this.engine = engine;
    this.handles = Object.freeze(handles);
    this.owned = Object.freeze(owned);
  }

  /**
   * `Memory.create(md, eng)` allocates every buffer; `Memory.create(md, eng, handles)` wraps existing
   * heap buffers (one handle, or `[values, offsets]` for grouped; `undefined` in the array allocates
   * that one). A grouped desc with per-group sizes gets its allocated offsets filled in.
   */
  static create(desc: MemoryDesc, engine: GpuEngine, buffers?: GPUBuffer | readonly (GPUBuffer | undefined)[], options?: MemoryOptions): GpuMemory;
  static create(desc: MemoryDesc, engine: Engine, handles?: Handle | readonly (Handle | undefined)[], options?: MemoryOptions): Memory;
  static create(desc: MemoryDesc, engine: Engine | GpuEngine): Memory | GpuMemory;
  static create(desc: MemoryDesc, engine: Engine | GpuEngine, handles?: Handle | GPUBuffer | readonly (Handle | GPUBuffer | undefined)[], options: MemoryOptions = {}): Memory | GpuMemory {
    if (engine?.kind === 'gpu') return GpuMemory.create(desc, engine, handles as GPUBuffer | readonly (GPUBuffer | undefined)[] | undefined, options);
    return Memory.createCpu(desc, engine, handles as Handle | readonly (Handle | undefined)[] | undefined, options);
  }

  private static createCpu(desc: MemoryDesc, engine: Engine, handles: Handle | readonly (Handle | undefined)[] | undefined, options: MemoryOptions): Memory {
    const fn = 'Memory.create';
    check(desc.format !== 'any', `${fn}: cannot create memory for a 'tag.any' descriptor; query the pd for the chosen one`);
    const list = handles === undefined ? [] : Array.isArray(handles) ? [...handles] : [handles as Handle];
    check(list.length <= desc.bufferCount, `${fn}: ${desc.bufferCount} buffer(s) expected, got ${list.length} handles`);
    const out: Handle[] = [];
    const owned: boolean[] = [];
    checkOptionKeys(fn, options, MEMORY_OPTION_KEYS);
    const cap = options.capacityBytes;
    if (cap !== undefined) check(Number.isSafeInteger(cap) && cap >= 0, `${fn}: capacityBytes must be a non-negative integer, got ${cap}`);
    check(cap === undefined || desc.getSize(0) === RUNTIME_SIZE_VAL, capacityWithoutRuntimeDims(fn, desc));
    try {
      for (let i = 0; i < desc.bufferCount; i++) {
        const bytes = desc.getSize(i);
        const h = list[i];
        if (h === undefined) {
          if (bytes === RUNTIME_SIZE_VAL && i === 0 && cap !== undefined) {
            out.push(engine.alloc(Math.max(cap, 1)));
            owned.push(true);
            continue;
          }
          check(bytes !== RUNTIME_SIZE_VAL, `${fn}: buffer ${i} size depends on runtime dims; pass a handle${i === 0 ? ', or { capacityBytes } to allocate that many bytes' : ''}`);
          out.push(engine.alloc(bytes));
          owned.push(true);
          continue;
        }
        const elt = i === 0 ? Math.max(1, dtBytes(desc.dataType, 1)) : 4;
        const need = bytes === RUNTIME_SIZE_VAL ? 0 : bytes;
        check(Number.isSafeInteger(h) && h > 0, `${fn}: handle ${i} must be a positive heap address, got ${h}`);
        check(h % elt === 0, `${fn}: handle ${i} (0x${h.toString(16)}) must be aligned to ${elt} bytes`);
        check(engine.heap.owningBlock(h, need) !== undefined, `${fn}: handle ${i} [0x${h.toString(16)}, +${need}) does not lie inside a live allocation of this engine`);
        out.push(h);
        owned.push(false);
      }
    } catch (e) {
      out.forEach((h, i) => owned[i] && engine.free(h));
      throw e;
    }
    if (cap !== undefined && list[0] !== undefined && engine.heap.owningBlock(out[0], cap) === undefined) {
      out.forEach((h, i) => owned[i] && engine.free(h));
      check(false, `${fn}: capacityBytes ${cap} from handle 0 must lie inside one live allocation`);
    }
    const mem = new Memory(desc, engine, out, owned, cap);
    countObject('memory');
    const g = desc.grouped;
    if (g?.groupSizes && list[1] === undefined) fromSizes(g.groupSizes, mem.offsets);
    if (desc.format === 'packed' && list[0] === undefined) markPackedEmpty(mem);
    return mem;
  }

  /**
   * @internal A view over `capacityBytes` from `handle` that the caller has checked to lie inside one live
   * allocation (expertViews: every view within its parent's rows): what `Memory.create(desc, eng, handle,
   * { capacityBytes })` makes, without its per-call checks.
   */
  static checkedView(desc: MemoryDesc, engine: Engine, handle: Handle, capacityBytes: number): Memory {
    const mem = new Memory(desc, engine, [handle], [false], capacityBytes);
    countObject('memory');
    return mem;
  }

  get isFreed(): boolean {
    return this.freed;
  }

  /** True while stream work that takes this memory as an argument has been enqueued and has not finished. */
  get inUse(): boolean {
    return this.streamUses > 0;
  }

  /** @internal Stream.enqueue: a task using this memory was enqueued (`+1`) or settled (`-1`). */
  streamUse(delta: 1 | -1): void {
    this.streamUses += delta;
  }

  /**
   * Zero-copy view of the values buffer: raw bits for bf16/f16, codes for the 8-bit low-precision
   * types, packed bytes (two elements per byte) for `s4 u4 f4_e2m1`. Use `write`/`read` for logical values.
   */
  get values(): ValuesView {
    this.checkAlive('values');
    if (!this.valuesView) {
      check(this.desc.getSize(0) !== RUNTIME_SIZE_VAL, 'Memory.values: size depends on runtime dims');
      const n = this.desc.format === 'packed' ? 0 : this.desc.spanElems;
      this.valuesView = makeView(this.desc.dataType, this.engine.buffer, this.handles[0], n);
    }
    return this.valuesView;
  }

  /** Zero-copy view of the offsets buffer (grouped descriptors: G+1 int32 entries). */
  get offsets(): Int32Array {
    this.checkAlive('offsets');
    check(this.desc.isGrouped, 'Memory.offsets: only grouped memory has an offsets buffer');
    if (!this.offsetsView) {
      this.offsetsView = new Int32Array(this.engine.buffer, this.handles[1], (this.desc.grouped?.groupCount ?? 0) + 1);
    }
    return this.offsetsView;
  }

  /**
   * Raw bytes of buffer `index` (0 values, 1 offsets). On packed weights this is the way to load
   * pre-packed panels, so it counts as filling them (executing on packed weights nothing filled is refused).
   */
  bytes(index = 0): Uint8Array {
    this.checkAlive('bytes');
    const n = this.desc.getSize(index);
    check(n !== RUNTIME_SIZE_VAL, 'Memory.bytes: size depends on runtime dims');
    if (this.desc.format === 'packed' && index === 0) markPackedFilled(this);
    return new Uint8Array(this.engine.buffer, this.handles[index], n);
  }

  /**
   * Number of elements `write` takes and `read` returns: every element of the values span (padding of
   * strided layouts included). Equals `values.length` except for the 4-bit types, whose view holds
   * packed bytes (two elements per byte).
   */
  get elementCount(): number {
    const v = this.values;
    return isSubByteType(this.desc.dataType) ? this.desc.spanElems : v.length;
  }

  /**
   * Copies the whole values span in (padding of strided layouts included) from logical numbers,
   * converting to the data type: f32 -> bf16/f16 bits (RNE), integers rounded half to even and
   * saturated, the low-precision types through their codecs (`toStored`: fp8 saturating, e8m0 rounded
   * down); `s4 u4 f4_e2m1` are encoded and packed two per byte (`encodeArray`). `data` has
   * `elementCount` entries.
   */
  write(data: ArrayLike<number>): this {
    this.checkNotPacked('write', 'fill it with a reorder from a plain memory');
    const v = this.values;
    const t = this.desc.dataType;
    const n = this.elementCount;
    check(data.length === n, `Memory.write: expected ${n} values, got ${data.length}`);
    this.checkIdle('write');
    if (isSubByteType(t)) (v as Uint8Array).set(encodeArray(t, data));
    else if (t === 'f32') v.set(data);
    else for (let i = 0; i < n; i++) v[i] = toStored(t, data[i]);
    return this;
  }

  /**
   * Copies the whole values span out as logical numbers (`elementCount` of them, padding included) in
   * the natural array of the data type: f32 -> `Float32Array`, s32 -> `Int32Array`, s8 and s4 ->
   * `Int8Array`, u8 and u4 -> `Uint8Array`; bf16, f16, the fp8 types, e8m0 and f4_e2m1 are decoded to
   * `Float32Array`, which holds each of their values exactly. A copy: writing it does not change the memory.
   */
  read(): HostArray {
    this.checkNotPacked('read', 'its values are panels in the kernels\' order, not elements');
    this.checkIdle('read');
    const v = this.values;
    const t = this.desc.dataType;
    if (isSubByteType(t)) {
      const f = decodeArray(t, v as Uint8Array, this.desc.spanElems);
      return t === 's4' ? Int8Array.from(f) : t === 'u4' ? Uint8Array.from(f) : f;
    }
    switch (t) {
      case 'f32': return Float32Array.from(v as Float32Array);
      case 's32': return Int32Array.from(v as Int32Array);
      case 's8': return Int8Array.from(v as Int8Array);
      case 'u8': return Uint8Array.from(v as Uint8Array);
      default: return Float32Array.from(v, (x) => fromStored(t, x));
    }
  }

  /** Releases the buffers this object allocated (never the ones passed in as handles). */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.handles.forEach((h, i) => this.owned[i] && !this.engine.isReleased && this.engine.free(h));
    this.valuesView = undefined;
    this.offsetsView = undefined;
  }

  private checkNotPacked(what: string, how: string): void {
    check(this.desc.format !== 'packed', `Memory.${what}: ${this.desc} has a packed layout (chosen by a pd for tag.any): ${how}`);
  }

  /**
   * A copy in or out while the workers may be writing or reading the buffer would return a half-written
   * result or change the inputs under the kernels, silently: refused until the stream's `wait()`.
   */
  private checkIdle(what: string): void {
    check(this.streamUses === 0, `Memory.${what}: the memory is an argument of stream work still in flight (executed, not waited for): await stream.wait() first`);
  }

  private checkAlive(what: string): void {
    if (this.freed) throw new DnnlError('invalid_arguments', `Memory.${what}: memory object used after free()`);
  }
}

