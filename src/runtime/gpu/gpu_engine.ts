import { DnnlError, check } from '../../common/status.js';
import { acquireDevice, type DeviceSource } from './webgpu_device.js';
import { StatusSlots, type StatusReadback } from './status_slots.js';
import { checkOptionKeys, optionKeys } from '../../common/option_keys.js';
import { PassProfiler, type GpuPassTime } from './pass_profiler.js';

export interface GpuEngineOptions {
  kind: 'gpu';
  /** A device of the caller's; otherwise one is requested from navigator.gpu or, in Node, the `webgpu` package. */
  device?: GPUDevice;
  /** The adapter to ask for (WebGPU's GPUPowerPreference). */
  powerPreference?: 'low-power' | 'high-performance';
}

const GPU_ENGINE_OPTION_KEYS = optionKeys<GpuEngineOptions>({ kind: true, device: true, powerPreference: true });

/** Bind groups kept per pipeline (GpuEngine.bindGroup): a layer executed a few times between waits still hits. */
const BIND_GROUPS_PER_PIPELINE = 16;

/** Same buffers, offsets and sizes at the same bindings, in the same order. */
function sameEntries(a: readonly GPUBindGroupEntry[], b: readonly GPUBindGroupEntry[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i], y = b[i];
    if (x.binding !== y.binding) return false;
    const rx = x.resource as GPUBufferBinding, ry = y.resource as GPUBufferBinding;
    if (rx.buffer !== ry.buffer || (rx.offset ?? 0) !== (ry.offset ?? 0) || rx.size !== ry.size) return false;
  }
  return true;
}

/** Bytes of a batch's staging arena for small host writes (see GpuEngine.write). */
const ARENA_BYTES = 64 * 1024;

/**
 * @internal what a primitive records dispatches with (GpuEngine.computePass): the batch's one compute
 * pass, or a pass of its own while profiling. No `end()`: the engine ends the shared pass.
 */
export interface PassRecorder {
  setPipeline(pipeline: GPUComputePipeline): void;
  setBindGroup(index: number, group: GPUBindGroup): void;
  dispatchWorkgroups(x: number, y?: number, z?: number): void;
  dispatchWorkgroupsIndirect(buffer: GPUBuffer, offset: number): void;
}

/**
 * The batch's shared compute pass: WebGPU orders the dispatches of a pass (each is its own usage scope:
 * Dawn puts the barriers between them), so consecutive stages need no pass each. A pipeline or bind group
 * set again unchanged is not passed on (each such call costs ~3 us of host time through Dawn).
 */
class SharedPass implements PassRecorder {
  private pipe: GPUComputePipeline | undefined;
  private group: GPUBindGroup | undefined;
  constructor(readonly pass: GPUComputePassEncoder) {}
  setPipeline(pipeline: GPUComputePipeline): void {
    if (pipeline === this.pipe) return;
    this.pipe = pipeline;
    // A bind group of an 'auto' layout belongs to one pipeline: set it again after a change.
    this.group = undefined;
    this.pass.setPipeline(pipeline);
  }
  setBindGroup(index: number, group: GPUBindGroup): void {
    if (index === 0 && group === this.group) return;
    if (index === 0) this.group = group;
    this.pass.setBindGroup(index, group);
  }
  dispatchWorkgroups(x: number, y?: number, z?: number): void {
    this.pass.dispatchWorkgroups(x, y, z);
  }
  dispatchWorkgroupsIndirect(buffer: GPUBuffer, offset: number): void {
    this.pass.dispatchWorkgroupsIndirect(buffer, offset);
  }
}

/** The open command encoder, the staging buffers its copies read (unmapped at submit) and what dies after it. */
interface Batch {
  readonly enc: GPUCommandEncoder;
  /** The compute pass `computePass` records into, open until another command of the encoder or the submit. */
  pass: SharedPass | undefined;
  /** What was recorded, for the message of a WebGPU error raised by the batch's one pair of error scopes. */
  readonly labels: Set<string>;
  readonly staging: GPUBuffer[];
  readonly retired: GPUBuffer[];
  arena: { readonly buf: GPUBuffer; readonly view: Uint8Array; used: number } | undefined;
}

/** What the kernels may use on this device. */
export interface GpuCaps {
  readonly shaderF16: boolean;
  readonly subgroups: boolean;
  readonly timestampQuery: boolean;
  /** WGSL's `packed_4x8_integer_dot_product` language feature (dot4I8Packed / dot4U8Packed). */
  readonly packedDot4: boolean;
  readonly maxStorageBufferBindingSize: number;
  readonly maxBufferSize: number;
  readonly maxComputeWorkgroupStorageSize: number;
  readonly maxComputeWorkgroupsPerDimension: number;
  readonly minStorageBufferOffsetAlignment: number;
}

/** A WGSL language feature of the GPU object the device came from (a caller's device: navigator.gpu's). */
function wgslFeature(gpu: unknown, name: string): boolean {
  const from = (gpu ?? (globalThis as { navigator?: { gpu?: unknown } }).navigator?.gpu) as { wgslLanguageFeatures?: ReadonlySet<string> } | undefined;
  return from?.wgslLanguageFeatures?.has(name) ?? false;
}

/**
 * The gpu engine kind (oneDNN `engine::kind::gpu`), backed by WebGPU: memory objects own `GPUBuffer`s,
 * streams submit command buffers to the device queue, and runtime data (offsets, routing ids) is read
 * by kernels only: the host never maps it before a launch.
 */
export class GpuEngine {
  readonly kind = 'gpu' as const;
  readonly device: GPUDevice;
  /** Adapter description (vendor, architecture, device) and where the device came from. */
  readonly adapterInfo: string;
  readonly source: DeviceSource;
  private capsNow: GpuCaps;
  /** @internal runtime-error slots read back at `stream.wait()`. */
  readonly status: StatusSlots;
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  /** Bytes asked of createBuffer, by buffer (bytesOf). */
  private readonly asked = new WeakMap<GPUBuffer, number>();
  /**
   * Bind groups by pipeline and resources: a primitive executed again on the same memory reuses its bind
   * groups (creating one costs ~20 us of host time through Dawn on an H200; a MoE layer needs a dozen).
   */
  private readonly bindGroups = new WeakMap<GPUComputePipeline, { layout: GPUBindGroupLayout; cached: { entries: readonly GPUBindGroupEntry[]; group: GPUBindGroup }[] }>();
  /** The last words `writeParams` wrote to each params buffer: unchanged params are not written again. */
  private readonly lastParams = new WeakMap<GPUBuffer, Uint32Array>();
  private released = false;
  /** release(): the outcome of the work enqueued before it (its first error, else undefined), settled after the teardown. */
  private drained: Promise<unknown> | undefined;
  private lostReason: string | undefined;
  private asyncError: DnnlError | undefined;
  private outstanding = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly lostPromise: Promise<void>;
  /**
   * Bind groups, command buffers and host bytes of submitted work, held until the queue is done so
   * that nothing a submission refers to depends on how the bindings track wrapper lifetimes. (The
   * crashes first blamed on this were Dawn's instance being collected: see AcquiredDevice.owners.)
   */
  private inflight: unknown[] = [];

  /**
   * The command encoder that primitives record into until the next submit (stream.wait, a read, an
   * explicit `submit()`): the stages of a layer reach the device in one submit, with no host round trip.
   */
  private batch: Batch | undefined;
  private recording = false;
  /** Timestamps of every compute pass while profiling (setProfiling). */
  private profiler: PassProfiler | undefined;

  /** Keeps the GPU instance and adapter alive as long as the engine (see AcquiredDevice.owners). */
  private readonly owners: readonly unknown[];

  private constructor(device: GPUDevice, adapterInfo: string, source: DeviceSource, owners: readonly unknown[] = []) {
    this.owners = owners;
    this.device = device;
    this.adapterInfo = adapterInfo;
    this.source = source;
    const l = device.limits;
    this.capsNow = Object.freeze({
      shaderF16: device.features.has('shader-f16'),
      subgroups: device.features.has('subgroups'),
      timestampQuery: device.features.has('timestamp-query'),
      packedDot4: wgslFeature(owners[0], 'packed_4x8_integer_dot_product'),
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxBufferSize: l.maxBufferSize,
      maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
      maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
      minStorageBufferOffsetAlignment: l.minStorageBufferOffsetAlignment,
    });
    this.status = new StatusSlots(device);
    this.lostPromise = device.lost.then((info) => {
      this.lostReason = `${info.reason ?? 'unknown'}: ${info.message}`;
    });
    // An error outside the batch's validation scope (e.g. out of memory at submit, which no scope wraps)
    // still reaches the next wait, as a DnnlError, instead of only the console.
    device.addEventListener('uncapturederror', (ev) => {
      const e = (ev as GPUUncapturedErrorEvent).error;
      const oom = e.constructor.name === 'GPUOutOfMemoryError';
      this.asyncError ??= new DnnlError(oom ? 'out_of_memory' : 'runtime_error', `gpu engine: ${oom ? 'device allocation failed' : 'WebGPU error'} outside any recorded batch: ${e.message}`);
    });
  }

  /** What the kernels may use on this device. */
  get caps(): GpuCaps {
    return this.capsNow;
  }

  /**
   * @internal tests: kernels plan their bindings for a smaller `maxStorageBufferBindingSize` than the
   * device's (WebGPU cannot lower a limit below its default, 128 MiB), so small shapes take the split
   * paths of tensors larger than one binding. Pipelines and executors created afterwards see it.
   */
  limitBindingSize(bytes: number): void {
    check(Number.isSafeInteger(bytes) && bytes >= this.capsNow.minStorageBufferOffsetAlignment, `limitBindingSize: ${bytes} must be an integer >= minStorageBufferOffsetAlignment`);
    this.capsNow = Object.freeze({ ...this.capsNow, maxStorageBufferBindingSize: Math.min(bytes, this.capsNow.maxStorageBufferBindingSize) });
  }

  static async create(options: GpuEngineOptions): Promise<GpuEngine> {
    checkOptionKeys('Engine.create', options, GPU_ENGINE_OPTION_KEYS);
    check(options.device === undefined || typeof (options.device as Partial<GPUDevice>).createBuffer === 'function', 'Engine.create: device must be a GPUDevice');
    if (options.device) return new GpuEngine(options.device, 'caller device', 'caller');
    const d = await acquireDevice(options.powerPreference);
    return new GpuEngine(d.device, d.adapterInfo, d.source, d.owners);
  }

  /** @internal a compute pipeline for `key`, built from `wgsl()` once per engine. */
  pipeline(key: string, wgsl: () => string): GPUComputePipeline {
    let p = this.pipelines.get(key);
    if (!p) {
      p = this.guarded(key, () => {
        const module = this.device.createShaderModule({ label: key, code: wgsl() });
        return this.device.createComputePipeline({ label: key, layout: 'auto', compute: { module, entryPoint: 'main' } });
      });
      this.pipelines.set(key, p);
    }
    return p;
  }

  /**
   * @internal runs `fn` inside WebGPU error scopes: API errors (failed allocations, invalid commands)
   * arrive asynchronously and are raised at the next stream.wait().
   */
  guarded<T>(what: string, fn: () => T): T {
    const dev = this.device;
    dev.pushErrorScope('out-of-memory');
    dev.pushErrorScope('validation');
    try {
      return fn();
    } finally {
      const note = (oom: boolean) => (e: GPUError | null): void => {
        if (e) this.asyncError ??= new DnnlError(oom ? 'out_of_memory' : 'runtime_error', `${what}: ${oom ? 'device allocation failed' : 'WebGPU error'}: ${e.message}`);
      };
      void dev.popErrorScope().then(note(false), () => undefined);
      void dev.popErrorScope().then(note(true), () => undefined);
    }
  }

  /** @internal a device buffer of at least `bytes` (rounded up to 16), checked against the device's limits. */
  createBuffer(bytes: number, what: string, usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST): GPUBuffer {
    this.checkAlive();
    check(Number.isSafeInteger(bytes) && bytes >= 0, `${what}: buffer size must be a non-negative integer, got ${bytes}`);
    const size = Math.max(16, Math.ceil(bytes / 16) * 16);
    if (size > this.caps.maxBufferSize) throw new DnnlError('out_of_memory', `${what}: ${size} bytes exceed the device's maxBufferSize ${this.caps.maxBufferSize}`);
    const b = this.guarded(what, () => this.device.createBuffer({ label: what, size, usage }));
    this.asked.set(b, bytes);
    return b;
  }

  /**
   * @internal the bytes a buffer holds for a memory wrapped over it: what was asked of createBuffer for
   * the engine's own (not its 16-byte padding: a runtime-rows view over a [1] memory holds one row, as
   * on the cpu engine), the whole buffer for a caller's.
   */
  bytesOf(b: GPUBuffer): number {
    return this.asked.get(b) ?? b.size;
  }

  /**
   * @internal records commands into the engine's open command encoder (opened on first use), inside
   * WebGPU error scopes. `record` must not call `write`: writes go before, so that they stay ordered.
   */
  encode(label: string, record: (enc: GPUCommandEncoder) => void): void {
    this.checkAlive();
    check(!this.recording, `${label}: gpu engine: encode() called while recording`);
    const b = this.openBatch();
    b.labels.add(label);
    this.endPass(b);
    this.recording = true;
    try {
      record(this.profiler ? this.profiler.wrap(b.enc) : b.enc);
    } finally {
      this.recording = false;
    }
  }

  /**
   * @internal records dispatches into the batch's shared compute pass (opened on first use, ended by the
   * next other command or the submit): a MoE layer's stages take one pass, not one each. While profiling,
   * each call gets a compute pass of its own, labelled `label`, so that the profiler times it alone.
   * `record` must not call `write` or `encode`.
   */
  computePass(label: string, record: (pass: PassRecorder) => void): void {
    this.checkAlive();
    check(!this.recording, `${label}: gpu engine: computePass() called while recording`);
    const b = this.openBatch();
    b.labels.add(label);
    this.recording = true;
    try {
      if (this.profiler) {
        // Profiling turned on while a shared pass is open: it ends before the timed one begins.
        this.endPass(b);
        const pass = this.profiler.wrap(b.enc).beginComputePass({ label });
        try {
          record(pass);
        } finally {
          pass.end();
          this.inflight.push(pass);
        }
        return;
      }
      b.pass ??= new SharedPass(b.enc.beginComputePass({ label: 'groupdnn batch' }));
      record(b.pass);
    } finally {
      this.recording = false;
    }
  }

  /** Ends the batch's shared compute pass, before a command outside it. */
  private endPass(b: Batch): void {
    if (!b.pass) return;
    b.pass.pass.end();
    this.inflight.push(b.pass.pass);
    b.pass = undefined;
  }

  /**
   * The open batch, opened with one validation error scope that its submit closes: error scopes cost
   * ~4 us of host time to push and ~14 us to pop through Dawn on an H200, and a batch records dozens of
   * commands. The batch itself allocates only its staging buffers, each created inside an out-of-memory
   * scope of its own (`guarded`); device allocations of executors and memories are guarded likewise.
   */
  private openBatch(forReadback = false): Batch {
    if (this.batch) return this.batch;
    const dev = this.device;
    dev.pushErrorScope('validation');
    const enc = dev.createCommandEncoder({ label: 'groupdnn batch' });
    this.batch = { enc, pass: undefined, labels: new Set(), staging: [], retired: [], arena: undefined };
    // Slots a kernel may have written since their last clear, zeroed before any work (a batch opened only
    // to read slots back must not clear them first).
    if (!forReadback) this.status.clearIfNeeded(enc);
    return this.batch;
  }

  /**
   * @internal a bind group of `pipeline`'s group 0 with `entries`, reused while the same resources come
   * again (same buffers, offsets and sizes, in the same order). At most BIND_GROUPS_PER_PIPELINE per
   * pipeline are kept, the least recently used dropped first.
   */
  bindGroup(pipeline: GPUComputePipeline, entries: readonly GPUBindGroupEntry[]): GPUBindGroup {
    let c = this.bindGroups.get(pipeline);
    if (!c) {
      c = { layout: pipeline.getBindGroupLayout(0), cached: [] };
      this.bindGroups.set(pipeline, c);
    }
    const list = c.cached;
    const at = list.findIndex((x) => sameEntries(x.entries, entries));
    if (at >= 0) {
      const hit = list[at];
      if (at > 0) {
        list.splice(at, 1);
        list.unshift(hit);
      }
      return hit.group;
    }
    const group = this.device.createBindGroup({ layout: c.layout, entries });
    list.unshift({ entries: entries.map((e) => ({ ...e, resource: { ...(e.resource as GPUBufferBinding) } })), group });
    if (list.length > BIND_GROUPS_PER_PIPELINE) list.pop();
    return group;
  }

  /** @internal hands the open command encoder to the queue; buffers retired meanwhile are destroyed after it. */
  submit(): void {
    const b = this.batch;
    if (!b) return;
    this.batch = undefined;
    const dev = this.device;
    try {
      this.endPass(b);
      for (const x of b.staging) if (x.mapState === 'mapped') x.unmap();
      this.profiler?.record(b.enc);
      const cb = b.enc.finish();
      this.inflight.push(b.enc, cb);
      dev.queue.submit([cb]);
    } finally {
      const what = [...b.labels].join(', ') || 'host writes';
      void dev.popErrorScope().then((e) => {
        if (e) this.asyncError ??= new DnnlError('runtime_error', `${what}: WebGPU error: ${e.message}`);
      }, () => undefined);
    }
    // destroy() after submit: WebGPU keeps a buffer alive for the work already submitted.
    for (const x of b.staging) x.destroy();
    for (const x of b.retired) x.destroy();
  }

  /**
   * @internal destroys buffers of an executor or memory; while recorded commands may still use them,
   * only after the next submit.
   */
  retire(...buffers: (GPUBuffer | undefined)[]): void {
    for (const x of buffers) {
      if (!x) continue;
      if (this.batch) this.batch.retired.push(x);
      else x.destroy();
    }
  }

  /**
   * @internal writes host bytes to a buffer, ordered after every command recorded so far: directly on the
   * queue when no encoder is open, otherwise as a staged copy inside it (a queue write would overtake
   * the recorded, not yet submitted commands). Sizes and offsets are multiples of 4, as WebGPU requires.
   */
  write(buffer: GPUBuffer, byteOffset: number, data: ArrayBuffer | ArrayBufferView<ArrayBuffer>): void {
    check(!this.recording, 'gpu engine: write() called while recording commands');
    const b = this.batch;
    if (!b) {
      this.inflight.push(data);
      this.device.queue.writeBuffer(buffer, byteOffset, data);
      return;
    }
    const bytes = ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : new Uint8Array(data);
    const n = bytes.byteLength;
    if (n === 0) return;
    b.labels.add('write');
    this.endPass(b);
    // Inside the batch's error scopes.
    {
      // Small writes (kernel params) share one staging arena per batch: creating a mapped buffer costs
      // ~0.1 ms on a real device (measured on an H200 through Dawn), a copy inside the encoder nothing.
      if (n <= ARENA_BYTES / 4) {
        if (!b.arena || b.arena.used + n > ARENA_BYTES) {
          const buf = this.guarded('staging arena', () => this.device.createBuffer({ label: 'groupdnn staging arena', size: ARENA_BYTES, usage: GPUBufferUsage.COPY_SRC, mappedAtCreation: true }));
          b.arena = { buf, view: new Uint8Array(buf.getMappedRange()), used: 0 };
          b.staging.push(buf);
        }
        const a = b.arena;
        a.view.set(bytes, a.used);
        b.enc.copyBufferToBuffer(a.buf, a.used, buffer, byteOffset, n);
        a.used += Math.ceil(n / 4) * 4;
        return;
      }
      const st = this.guarded('staged write', () => this.device.createBuffer({ label: 'groupdnn staged write', size: n, usage: GPUBufferUsage.COPY_SRC, mappedAtCreation: true }));
      new Uint8Array(st.getMappedRange()).set(bytes);
      st.unmap();
      b.enc.copyBufferToBuffer(st, 0, buffer, byteOffset, n);
      b.staging.push(st);
    }
  }

  /**
   * @internal writes a kernel's params (as `write`), skipped when the buffer already holds these words
   * from the previous writeParams: an executor executed again with the same arguments writes nothing,
   * so its batch needs no staging copy. Only for buffers no one else writes.
   */
  writeParams(buffer: GPUBuffer, words: Uint32Array<ArrayBuffer>): void {
    const last = this.lastParams.get(buffer);
    // A plain loop over words: this runs for every kernel of every execution.
    if (last && last.length === words.length) {
      let i = 0;
      while (i < words.length && last[i] === words[i]) i++;
      if (i === words.length) return;
    }
    this.lastParams.set(buffer, words.slice());
    this.write(buffer, 0, words);
  }

  /** @internal keeps the objects of a submission alive until the next flush (see `inflight`). */
  keepAlive(...objs: unknown[]): void {
    for (const o of objs) this.inflight.push(o);
  }

  /** @internal a stream enqueued work. */
  beginWork(): void {
    this.outstanding++;
  }

  /** @internal a stream's work finished (or failed). */
  endWork(): void {
    if (--this.outstanding > 0) return;
    const w = this.idleWaiters;
    this.idleWaiters = [];
    for (const f of w) f();
  }

  /**
   * @internal waits for the queue (or the device's loss: never a hang), then raises the first error:
   * a lost device, a WebGPU error, or a runtime error a kernel wrote to its status slot.
   */
  async flush(): Promise<void> {
    if (this.released) {
      // Work enqueued before release() was drained by it (the device goes after that): its outcome, once.
      const d = this.drained;
      this.drained = undefined;
      const e = d ? await d : undefined;
      if (e) throw e;
      return;
    }
    return this.flushNow();
  }

  private async flushNow(): Promise<void> {
    let readback: StatusReadback | undefined;
    if (this.lostReason === undefined) {
      // The slots' read-back goes into the batch after its work: one submit, and its map completes
      // after all submitted work (one round trip, not onSubmittedWorkDone and then a map).
      if (this.status.pending > 0) {
        const b = this.openBatch(true);
        b.labels.add('status read-back');
        this.endPass(b);
        readback = this.status.record(b.enc);
      }
      this.submit();
    }
    const held = this.inflight;
    this.inflight = [];
    if (this.lostReason === undefined && !readback) await Promise.race([this.device.queue.onSubmittedWorkDone(), this.lostPromise]);
    this.checkDevice();
    const err = readback ? await Promise.race([this.status.read(readback), this.lostPromise.then(() => undefined)]) : undefined;
    if (this.profiler && this.lostReason === undefined) await Promise.race([this.profiler.collect(), this.lostPromise]);
    held.length = 0;
    this.checkDevice();
    const asyncErr = this.asyncError;
    this.asyncError = undefined;
    if (asyncErr) throw asyncErr;
    if (err) throw err;
  }

  /**
   * Times every compute pass recorded from now on with the GPU's timestamps (WebGPU `timestamp-query`),
   * read at each `stream.wait()`: `takeProfile()` returns them. Off by default (the queries add a little
   * GPU work per pass). Throws `unimplemented` where the device has no `timestamp-query`.
   */
  setProfiling(on: boolean): void {
    if (!on) {
      this.profiler?.destroy();
      this.profiler = undefined;
      return;
    }
    if (!this.caps.timestampQuery) throw new DnnlError('unimplemented', "gpu engine: setProfiling needs the device feature 'timestamp-query', which this device lacks");
    this.profiler ??= new PassProfiler(this.device);
  }

  /** The GPU time of each compute pass timed since the last call (profiling on, up to the last wait). */
  takeProfile(): GpuPassTime[] {
    return this.profiler?.take() ?? [];
  }

  /** Resolves when no stream work is in flight on this engine. */
  idle(): Promise<void> {
    if (this.outstanding === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Releases the engine: from now on nothing new may use it (`engine: used after release()`). Work
   * already enqueued on its streams still runs to the end, as on the cpu engine: it is submitted now,
   * and the engine's own buffers (and a device it requested itself) are destroyed once the queue is done
   * with it and its status slots are read. The next `stream.wait()` resolves, or rejects with that work's
   * own errors (bad runtime offsets...), as it would have without the release.
   */
  release(): void {
    if (this.released) return;
    // flushNow submits the recorded batch (and the status read-back) before its first await.
    const pending = this.lostReason === undefined ? this.flushNow() : undefined;
    this.released = true;
    if (!pending) {
      this.teardown();
      return;
    }
    this.drained = pending.then(() => undefined, (e: unknown) => e).finally(() => this.teardown());
  }

  private teardown(): void {
    this.status.destroy();
    this.profiler?.destroy();
    this.pipelines.clear();
    if (this.source !== 'caller') this.device.destroy();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.idle();
    this.release();
  }

  get isReleased(): boolean {
    return this.released;
  }

  /** @internal throws once the engine is released or its device lost. */
  checkAlive(): void {
    check(!this.released, 'engine: used after release()');
    this.checkDevice();
  }

  private checkDevice(): void {
    if (this.lostReason !== undefined) throw new DnnlError('runtime_error', `gpu engine: the device was lost (${this.lostReason})`);
  }
}
