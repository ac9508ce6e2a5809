/** GPU time of one compute pass (its label, e.g. 'matmul', 'moe.routing'), from timestamp queries. */
export interface GpuPassTime {
  readonly label: string;
  readonly ms: number;
}

/** Passes timed between two waits at most; later ones run untimed. */
const MAX_PASSES = 2048;

/**
 * Times every compute pass the engine records (`GpuEngine.setProfiling`): the encoder handed to a
 * primitive's `encode` adds begin / end timestamp writes to each `beginComputePass`, so no primitive
 * knows about it. Before a batch is submitted its queries are resolved and copied to a mappable buffer
 * (in the same submit); the wait maps them. The GPU's own clock: no host time is in these figures.
 * Dawn quantizes timestamps (to ~65 us on an H200) unless started with
 * `disable-dawn-features=timestamp_quantization` (in Node: GROUPDNN_DAWN_FLAGS, webgpu_device.ts).
 */
export class PassProfiler {
  private readonly device: GPUDevice;
  private readonly set: GPUQuerySet;
  private readonly resolveBuf: GPUBuffer;
  private labels: string[] = [];
  /** Passes whose queries were resolved into a pending read-back. */
  private resolved = 0;
  private pending: { read: GPUBuffer; first: number; count: number }[] = [];
  private log: GpuPassTime[] = [];

  constructor(device: GPUDevice) {
    this.device = device;
    this.set = device.createQuerySet({ label: 'groupdnn pass timestamps', type: 'timestamp', count: 2 * MAX_PASSES });
    this.resolveBuf = device.createBuffer({ label: 'groupdnn timestamp resolve', size: 16 * MAX_PASSES, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  }

  /** `enc` with each compute pass it begins timed (past MAX_PASSES since the last wait, untimed). */
  wrap(enc: GPUCommandEncoder): GPUCommandEncoder {
    const begin = (desc?: GPUComputePassDescriptor): GPUComputePassEncoder => {
      if (this.labels.length >= MAX_PASSES) return enc.beginComputePass(desc);
      const i = 2 * this.labels.length;
      this.labels.push(desc?.label ?? 'pass');
      return enc.beginComputePass({ ...desc, timestampWrites: { querySet: this.set, beginningOfPassWriteIndex: i, endOfPassWriteIndex: i + 1 } });
    };
    return new Proxy(enc, {
      get: (target, key) => {
        if (key === 'beginComputePass') return begin;
        const v = Reflect.get(target, key) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  /** Records, into the batch about to be submitted, the resolve and read-back copy of its passes' timestamps. */
  record(enc: GPUCommandEncoder): void {
    const count = this.labels.length - this.resolved;
    if (count === 0) return;
    const first = this.resolved;
    const read = this.device.createBuffer({ label: 'groupdnn timestamp read-back', size: 16 * count, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    // Resolved at offset 0 (resolve offsets must be multiples of 256): batches reach the queue in order,
    // so the previous batch's copy has read the buffer before this resolve writes it.
    enc.resolveQuerySet(this.set, 2 * first, 2 * count, this.resolveBuf, 0);
    enc.copyBufferToBuffer(this.resolveBuf, 0, read, 0, 16 * count);
    this.pending.push({ read, first, count });
    this.resolved = this.labels.length;
  }

  /** After the wait's work: maps the read-backs into the log and starts a new window of passes. */
  async collect(): Promise<void> {
    const pending = this.pending, labels = this.labels;
    this.pending = [];
    this.labels = [];
    this.resolved = 0;
    for (const p of pending) {
      await p.read.mapAsync(GPUMapMode.READ);
      const t = new BigUint64Array(p.read.getMappedRange().slice(0));
      p.read.destroy();
      for (let j = 0; j < p.count; j++) this.log.push({ label: labels[p.first + j], ms: Number(t[2 * j + 1] - t[2 * j]) / 1e6 });
    }
  }

  /** The passes timed since the last call, in recording order. */
  take(): GpuPassTime[] {
    const l = this.log;
    this.log = [];
    return l;
  }

  destroy(): void {
    this.set.destroy();
    this.resolveBuf.destroy();
  }
}
