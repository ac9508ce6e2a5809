import * as Comlink from 'comlink';
import { DnnlError } from '../common/status.js';
import { CMD, CTRL } from './control_block.js';

/** What the main thread asks of a worker through comlink (set-up only; jobs go through Atomics). */
interface WorkerApi {
  init(args: { module: WebAssembly.Module; memory: WebAssembly.Memory; ctrlPtr: number; index: number; stackTop: number }): Promise<boolean>;
}

/** The parts of Node's and the browser's Worker we use. */
interface WorkerHandle {
  terminate(): unknown;
  onFailure(cb: (why: string) => void): void;
  endpoint: Comlink.Endpoint;
}

type AtomicsWithWaitAsync = typeof Atomics & {
  waitAsync(view: Int32Array, index: number, value: number): { async: boolean; value: Promise<string> | string };
};

const workerUrl = new URL('./worker_main.js', import.meta.url);

async function spawnWorker(): Promise<WorkerHandle> {
  const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === 'string';
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const { default: nodeEndpoint } = await import('comlink/dist/esm/node-adapter.mjs');
    const w = new Worker(workerUrl);
    w.unref(); // an idle pool must not keep the process alive
    return {
      terminate: () => w.terminate(),
      onFailure: (cb) => {
        w.on('error', (e: Error) => cb(e.message));
        w.on('exit', (code: number) => cb(`exited with code ${code}`));
      },
      endpoint: nodeEndpoint(w as unknown as Parameters<typeof nodeEndpoint>[0]),
    };
  }
  const w = new Worker(workerUrl, { type: 'module' });
  return {
    terminate: () => w.terminate(),
    onFailure: (cb) => w.addEventListener('error', (e) => cb(e.message)),
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

  constructor(size: number, module: WebAssembly.Module, memory: WebAssembly.Memory, ctrlPtr: number, stackTops: readonly number[]) {
    this.size = size;
    this.module = module;
    this.memory = memory;
    this.ctrlPtr = ctrlPtr;
    this.ctrl = new Int32Array(memory.buffer, ctrlPtr, CTRL.INTS);
    this.stackTops = stackTops;
  }

  /** Starts (or restarts) the workers. */
  async start(): Promise<void> {
    const workers = await Promise.all(Array.from({ length: this.size }, spawnWorker));
    this.brokenReason = undefined;
    workers.forEach((w, i) =>
      w.onFailure((why) => {
        if (this.workers !== workers) return; // a retired pool
        this.brokenReason = `worker ${i} ${why}`;
        this.failure?.(this.brokenReason);
      }),
    );
    Atomics.store(this.ctrl, CTRL.NWORKERS, this.size);
    await Promise.all(
      workers.map((w, index) =>
        Comlink.wrap<WorkerApi>(w.endpoint).init({ module: this.module, memory: this.memory, ctrlPtr: this.ctrlPtr, index, stackTop: this.stackTops[index] }),
      ),
    );
    this.workers = workers;
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
    Atomics.add(c, CTRL.GEN, 1);
    Atomics.notify(c, CTRL.GEN);
    try {
      await Promise.race([this.allDone(), failed]);
    } finally {
      this.failure = undefined;
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

  /** Terminates the workers (the engine's `release`). */
  close(): void {
    this.retire();
  }
}
