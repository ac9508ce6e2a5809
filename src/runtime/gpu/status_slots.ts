import { DnnlError } from '../../common/status.js';

/** Words per slot: [code, index, value, other]. */
export const SLOT_WORDS = 4;
const SLOTS_PER_BLOCK = 1024;

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
  private readonly blocks: GPUBuffer[] = [];
  private used: { block: number; slot: number; decode: SlotDecoder }[] = [];
  /** Mappable read-back buffers between waits (concurrent waits each take their own). */
  private readPool: GPUBuffer[] = [];

  /**
   * @internal set by the stream while a task records: a composite primitive (moe.layer) renames the
   * errors of its stages, also those found on the device and decoded at wait().
   */
  errorMap: ((e: DnnlError) => DnnlError) | undefined;

  constructor(device: GPUDevice) {
    this.device = device;
  }

  /** A zeroed slot for one execution: the buffer to bind and the word offset of the slot. */
  take(decode: SlotDecoder): { buffer: GPUBuffer; word: number } {
    const n = this.used.length;
    const block = Math.floor(n / SLOTS_PER_BLOCK), slot = n % SLOTS_PER_BLOCK;
    if (block === this.blocks.length) {
      this.blocks.push(this.device.createBuffer({
        label: 'groupdnn status slots',
        size: SLOTS_PER_BLOCK * SLOT_WORDS * 4,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      }));
    }
    const map = this.errorMap;
    this.used.push({ block, slot, decode: map ? (c, i, x, y) => { const e = decode(c, i, x, y); return e && map(e); } : decode });
    return { buffer: this.blocks[block], word: slot * SLOT_WORDS };
  }

  get pending(): number {
    return this.used.length;
  }

  /** Reads the slots used since the last call (after the queue's work), clears them, returns the first error. */
  async collect(): Promise<DnnlError | undefined> {
    const used = this.used;
    if (used.length === 0) return undefined;
    this.used = [];
    const blocks = Math.floor((used.length - 1) / SLOTS_PER_BLOCK) + 1;
    const bytes = SLOTS_PER_BLOCK * SLOT_WORDS * 4;
    // A read-back buffer from the pool: allocating a mappable buffer per wait cost ~0.5 ms on an H200.
    const at = this.readPool.findIndex((b) => b.size >= bytes * blocks);
    const read = at >= 0 ? this.readPool.splice(at, 1)[0] : this.device.createBuffer({ label: 'groupdnn status read-back', size: bytes * blocks, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = this.device.createCommandEncoder();
    for (let b = 0; b < blocks; b++) {
      enc.copyBufferToBuffer(this.blocks[b], 0, read, b * bytes, bytes);
      enc.clearBuffer(this.blocks[b]);
    }
    this.device.queue.submit([enc.finish()]);
    try {
      await read.mapAsync(GPUMapMode.READ);
    } catch (e) {
      read.destroy();
      throw e;
    }
    const words = new Uint32Array(read.getMappedRange().slice(0, bytes * blocks));
    read.unmap();
    this.readPool.push(read);
    for (const u of used) {
      const w = (u.block * SLOTS_PER_BLOCK + u.slot) * SLOT_WORDS;
      if (words[w] === 0) continue;
      const err = u.decode(words[w], words[w + 1] | 0, words[w + 2] | 0, words[w + 3] | 0);
      if (err) return err;
    }
    return undefined;
  }

  destroy(): void {
    for (const b of this.blocks) b.destroy();
    for (const b of this.readPool) b.destroy();
    this.readPool = [];
    this.blocks.length = 0;
    this.used = [];
  }
}
