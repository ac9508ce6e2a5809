import * as Comlink from 'comlink';
import { DnnlError } from '../common/status.js';
import { CMD, CTRL } from './control_block.js';
import { workerScriptUrl } from './worker_url.js';

/** What the main thread asks of a worker through comlink (set-up only; jobs go through Atomics). */
interface WorkerApi {
  init(args: { module: WebAssembly.Module; memory: WebAssembly.Memory; ctrlPtr: number; index: number; stackTop: number }): Promise<boolean>;
}

/** The parts of Node's and the browser's Worker we use. */
interface WorkerHandle {
  terminate(): unknown;
  onFailure(cb: (why: string) => void): void;
  /** Node: let the process exit while the worker idles (no-op in browsers). */
  unref(): void;
  /** Node: keep the process alive while a job runs (Atomics.waitAsync alone does not). */
  ref(): void;
  endpoint: Comlink.Endpoint;
}

type AtomicsWithWaitAsync = typeof Atomics & {
  waitAsync(view: Int32Array, index: number, value: number): { async: boolean; value: Promise<string> | string };
};

let workerUrl: URL | undefined;

/** @internal tests: start workers from another script (e.g. one that fails to load); undefined restores the default. Returns the previous URL. */
export function setWorkerUrlForTesting(url: URL | undefined): URL | undefined {
  const prev = workerUrl;
  workerUrl = url;
  return prev;
}

async function spawnWorker(): Promise<WorkerHandle> {
  const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === 'string';
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const { default: nodeEndpoint } = await import('comlink/dist/esm/node-adapter.mjs');
    const w = new Worker(workerUrl ?? workerScriptUrl());
    return {
      terminate: () => w.terminate(),
      // Adding a 'message' listener (comlink does) re-refs the worker's port: unref after set-up.
      unref: () => w.unref(),
      ref: () => w.ref(),
      onFailure: (cb) => {
        w.on('error', (e: Error) => cb(e.message));
        w.on('exit', (code: number) => cb(`exited with code ${code}`));
      },
      endpoint: nodeEndpoint(w as unknown as Parameters<typeof nodeEndpoint>[0]),
    };
  }
  const w = new Worker(workerUrl ?? workerScriptUrl(), { type: 'module' });
  return {
    terminate: () => w.terminate(),
    onFailure: (cb) => {
      w.addEventListener('error', (e) => cb(e.message || 'failed to load (network, MIME type or a module it imports)'));
      w.addEventListener('messageerror', () => cb('could not deserialize a message'));
    },
    unref: () => undefined,
    ref: () => undefined,
    endpoint: w,
  };
}

/**
 * N workers sharing the engine heap. A dispatch writes the job pointer into the control block, bumps
 * the generation and notifies; each worker runs the job and counts itself done; the last one notifies
 * the main thread, which waits asynchronously (`Atomics.waitAsync`), so nothing spins. A worker that
 * throws reports through the control block; one that dies fails the job with `runtime_error`, and the
 * pool is rebuilt on the next dispatch.
 */
export class WorkerPool {
  readonly size: number;
  private readonly module: WebAssembly.Module;
  private readonly memory: WebAssembly.Memory;
  private readonly ctrl: Int32Array;
  private readonly ctrlPtr: number;
  private readonly stackTops: readonly number[];
  private workers: WorkerHandle[] | undefined;
  private failure: ((why: string) => void) | undefined;
  private brokenReason: string | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly startTimeoutMs: number;

  constructor(size: number, module: WebAssembly.Module, memory: WebAssembly.Memory, ctrlPtr: number, stackTops: readonly number[], startTimeoutMs = 10_000) {
    this.startTimeoutMs = startTimeoutMs;
    this.size = size;
    this.module = module;
    this.memory = memory;
    this.ctrlPtr = ctrlPtr;
    this.ctrl = new Int32Array(memory.buffer, ctrlPtr, CTRL.INTS);
    this.stackTops = stackTops;
  }

  /**
   * Starts (or restarts) the workers. Rejects with `runtime_error` naming the worker and the cause when
   * one fails to load or initialise, or when they are not all ready within `timeoutMs` (no hang).
   */
  async start(timeoutMs = this.startTimeoutMs): Promise<void> {
    let workers: WorkerHandle[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failStart: ((e: DnnlError) => void) | undefined;
    const failed = new Promise<never>((_, reject) => { failStart = reject; });
    try {
      workers = await Promise.all(Array.from({ length: this.size }, spawnWorker));
      this.brokenReason = undefined;
      workers.forEach((w, i) =>
        w.onFailure((why) => {
          failStart?.(new DnnlError('runtime_error', `Engine.create: worker ${i} ${why}`));
          if (this.workers !== workers) return; // a retired pool, or one still starting
          this.brokenReason = `worker ${i} ${why}`;
          this.failure?.(this.brokenReason);
        }),
      );
      Atomics.store(this.ctrl, CTRL.NWORKERS, this.size);
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new DnnlError('runtime_error', `Engine.create: the ${this.size} workers were not ready within ${timeoutMs} ms (EngineOptions.startTimeoutMs)`)), timeoutMs);
      });
      const proxies = workers.map((w) => Comlink.wrap<WorkerApi>(w.endpoint));
      await Promise.race([
        Promise.all(proxies.map((p, index) => p.init({ module: this.module, memory: this.memory, ctrlPtr: this.ctrlPtr, index, stackTop: this.stackTops[index] }))),
        failed, timeout,
      ]);
      // Set-up is over: drop comlink's listeners and let an idle pool not keep a Node process alive.
      proxies.forEach((p) => p[Comlink.releaseProxy]());
      workers.forEach((w) => w.unref());
      this.workers = workers;
    } catch (e) {
      workers.forEach((w) => w.terminate());
      throw e;
    } finally {
      failStart = undefined;
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  /** Runs `prepare` then the job at `jobPtr` on all workers; jobs are serialized engine-wide. */
  run(prepare: () => number, cmd: number = CMD.RUN): Promise<void> {
    const p = this.queue.then(() => this.dispatch(prepare(), cmd));
    this.queue = p.catch(() => undefined);
    return p;
  }

  private async dispatch(jobPtr: number, cmd: number): Promise<void> {
    if (!this.workers || this.brokenReason !== undefined) {
      this.retire();
      await this.start();
    }
    const c = this.ctrl;
    Atomics.store(c, CTRL.DONE, 0);
    Atomics.store(c, CTRL.ERR, 0);
    Atomics.store(c, CTRL.JOB, jobPtr);
    Atomics.store(c, CTRL.CMD, cmd);
    const failed = new Promise<never>((_, reject) => {
      this.failure = (why) => reject(new DnnlError('runtime_error', `worker pool: ${why}; the job was abandoned and the pool will restart`));
    });
    const workers = this.workers!;
    workers.forEach((w) => w.ref());
    Atomics.add(c, CTRL.GEN, 1);
    Atomics.notify(c, CTRL.GEN);
    try {
      await Promise.race([this.allDone(), failed]);
    } finally {
      this.failure = undefined;
      workers.forEach((w) => w.unref());
    }
    const errWorker = Atomics.load(c, CTRL.ERR);
    if (errWorker !== 0) {
      const bytes = new Uint8Array(this.memory.buffer, this.ctrlPtr + CTRL.MSG * 4, CTRL.MSG_BYTES).slice();
      const msg = new TextDecoder().decode(bytes.subarray(0, Math.max(0, bytes.indexOf(0))));
      throw new DnnlError('runtime_error', `kernel failed: ${msg}`);
    }
  }

  private async allDone(): Promise<void> {
    const c = this.ctrl;
    const A = Atomics as AtomicsWithWaitAsync;
    for (;;) {
      const v = Atomics.load(c, CTRL.DONE);
      if (v >= this.size) return;
      const r = A.waitAsync(c, CTRL.DONE, v);
      if (r.async) await r.value;
    }
  }

  private retire(): void {
    const old = this.workers;
    this.workers = undefined;
    old?.forEach((w) => w.terminate());
  }

  /** Terminates the workers (the engine's `release`, once its stream work is done). */
  close(): void {
    this.retire();
  }

  /** @internal tests: whether the workers are up (started and not closed). */
  get running(): boolean {
    return this.workers !== undefined;
  }
}
