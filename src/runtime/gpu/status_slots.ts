import { DnnlError } from '../../common/status.js';

/** Words per slot: [code, index, value, other]. */
export const SLOT_WORDS = 4;
const SLOTS_PER_BLOCK = 1024;

/**
 * One execution's slot: kernels bind `binding` (a 16-byte range of a status buffer) and write words
 * 0..3 of it (`word` is always 0). A range rather than a word index in the kernel's params: the params
 * and bind groups of an execution then stay the same from one wait to the next (the n-th execution
 * after a wait always takes the n-th slot), so executing again writes nothing and creates nothing.
 */
export interface StatusSlot {
  readonly binding: GPUBufferBinding;
  readonly word: 0;
}

/** A slot taken since the last read-back: where it is, its decoder, and who wants to know it was read. */
interface UsedSlot {
  readonly block: number;
  readonly slot: number;
  readonly decode: SlotDecoder;
  readonly settle: SlotSettle | undefined;
}

/** The slots to read back after a batch: recorded into its encoder by `StatusSlots.record`. */
export interface StatusReadback {
  readonly read: GPUBuffer;
  readonly bytes: number;
  readonly used: readonly UsedSlot[];
}

/**
 * Called once a slot was read back: `failed` when a kernel wrote it. An executor whose kernels keep
 * device state that only an error leaves dirty (moe.routing's flag) clears it only when needed.
 */
export type SlotSettle = (failed: boolean) => void;

/** Turns a slot's words into the error a kernel reported (undefined: no error). */
export type SlotDecoder = (code: number, i: number, x: number, y: number) => DnnlError | undefined;

/**
 * Runtime errors found on the device (bad offsets, bad routing ids): each execution that validates
 * runtime data gets a slot of 4 u32 words in a status buffer; its kernels write the first violation
 * there. `stream.wait()` copies the slots used since the last wait back (after the work, never before
 * it: the launch itself does not depend on them) and raises the first error in submission order.
 */
export class StatusSlots {
  private readonly device: GPUDevice;
  /** Bytes between slots: storage bindings start at multiples of minStorageBufferOffsetAlignment. */
  private readonly stride: number;
  private readonly blocks: GPUBuffer[] = [];
  private used: UsedSlot[] = [];
  /** Read-backs recorded and not read yet: the slots they cover may hold errors. */
  private unread = 0;
  /** A read-back found a slot written (an error): the blocks must be zeroed before they are used again. */
  private dirty = false;
  /** Mappable read-back buffers between waits (concurrent waits each take their own). */
  private readPool: GPUBuffer[] = [];

  /**
   * @internal set by the stream while a task records: a composite primitive (moe.layer) renames the
   * errors of its stages, also those found on the device and decoded at wait().
   */
  errorMap: ((e: DnnlError) => DnnlError) | undefined;

  constructor(device: GPUDevice) {
    this.device = device;
    this.stride = Math.max(SLOT_WORDS * 4, device.limits.minStorageBufferOffsetAlignment);
  }

  /**
   * A zeroed slot for one execution (see StatusSlot); `settle` hears whether it was written once it is
   * read back; `map` renames its decoded error in place of errorMap (a task that records another
   * stage's kernel, as moe.layer's fused route + dispatch does for the dispatch).
   */
  take(decode: SlotDecoder, settle?: SlotSettle, map = this.errorMap): StatusSlot {
    const n = this.used.length;
    const block = Math.floor(n / SLOTS_PER_BLOCK), slot = n % SLOTS_PER_BLOCK;
    if (block === this.blocks.length) {
      this.blocks.push(this.device.createBuffer({
        label: 'groupdnn status slots',
        size: SLOTS_PER_BLOCK * this.stride,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      }));
    }
    this.used.push({ block, slot, decode: map ? (c, i, x, y) => { const e = decode(c, i, x, y); return e && map(e); } : decode, settle });
    const buffer = this.blocks[block];
    return { binding: { buffer, offset: slot * this.stride, size: SLOT_WORDS * 4 }, word: 0 };
  }

  get pending(): number {
    return this.used.length;
  }

  /**
   * Records into `enc` (a new batch's encoder, before its work) the clear of every block, when a slot may
   * hold an error: a read-back found one, or one is still unread (slots are reused from index 0 after each
   * read-back). Kernels write slots only on errors, so a run of clean waits clears nothing (a clearBuffer
   * per wait costs ~5 us of host time through Dawn on an H200).
   */
  clearIfNeeded(enc: GPUCommandEncoder): void {
    if (!this.dirty && this.unread === 0) return;
    this.dirty = false;
    for (const b of this.blocks) enc.clearBuffer(b);
  }

  /**
   * Records into `enc` (the batch's encoder, after its work) the copy of the slots used since the last
   * call to a mappable buffer; `read` then maps it. One submit for work and read-back.
   */
  record(enc: GPUCommandEncoder): StatusReadback | undefined {
    const used = this.used;
    if (used.length === 0) return undefined;
    this.used = [];
    const blockBytes = SLOTS_PER_BLOCK * this.stride;
    const blocks = Math.floor((used.length - 1) / SLOTS_PER_BLOCK) + 1;
    const bytes = (used.length - (blocks - 1) * SLOTS_PER_BLOCK) * this.stride + (blocks - 1) * blockBytes;
    // A read-back buffer from the pool: allocating a mappable buffer per wait cost ~0.5 ms on an H200.
    const at = this.readPool.findIndex((b) => b.size >= bytes);
    const read = at >= 0 ? this.readPool.splice(at, 1)[0] : this.device.createBuffer({ label: 'groupdnn status read-back', size: Math.max(bytes, 16 * this.stride), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    for (let b = 0; b < blocks; b++) {
      const n = Math.min(blockBytes, bytes - b * blockBytes);
      enc.copyBufferToBuffer(this.blocks[b], 0, read, b * blockBytes, n);
    }
    this.unread++;
    return { read, bytes, used };
  }

  /** Maps a read-back (after its submit) and returns the first error in execution order. */
  async read(r: StatusReadback): Promise<DnnlError | undefined> {
    let words: Uint32Array;
    try {
      await r.read.mapAsync(GPUMapMode.READ, 0, r.bytes);
      words = new Uint32Array(r.read.getMappedRange(0, r.bytes).slice(0));
    } catch (e) {
      // Unknown contents: cleared before the next use.
      this.dirty = true;
      this.unread--;
      r.read.destroy();
      throw e;
    }
    r.read.unmap();
    this.readPool.push(r.read);
    this.unread--;
    const perSlot = this.stride / 4;
    let first: DnnlError | undefined;
    for (const u of r.used) {
      const w = (u.block * SLOTS_PER_BLOCK + u.slot) * perSlot;
      const failed = words[w] !== 0;
      u.settle?.(failed);
      if (!failed) continue;
      this.dirty = true;
      first ??= u.decode(words[w], words[w + 1] | 0, words[w + 2] | 0, words[w + 3] | 0);
    }
    return first;
  }

  destroy(): void {
    for (const b of this.blocks) b.destroy();
    for (const b of this.readPool) b.destroy();
    this.readPool = [];
    this.blocks.length = 0;
    this.used = [];
  }
}
