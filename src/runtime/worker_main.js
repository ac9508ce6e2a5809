// Compute worker: instantiates the kernels on the engine's shared memory (set up through comlink),
// then sleeps on the control block and runs each dispatched job (Atomics.wait/notify, no spinning).
// Plain JavaScript so that Node, vitest, tsx and browser bundlers can all start it without a loader.
import * as Comlink from 'comlink';

// Control block (Int32 indices); mirrored in src/runtime/control_block.ts.
const GEN = 0, CMD = 1, JOB = 2, DONE = 3, ERR = 4, NWORKERS = 5, MSG = 16, MSG_BYTES = 192;
const CMD_RUN = 1, CMD_EXIT = 2, CMD_THROW = 3, CMD_DIE = 4;

const isNode = typeof self === 'undefined';
let endpoint;
if (isNode) {
  const { parentPort } = await import('node:worker_threads');
  const { default: nodeEndpoint } = await import('comlink/dist/esm/node-adapter.mjs');
  endpoint = nodeEndpoint(parentPort);
} else {
  endpoint = self;
}

function writeMessage(ctrl, text) {
  const bytes = new TextEncoder().encode(text).slice(0, MSG_BYTES - 1);
  const u8 = new Uint8Array(ctrl.buffer, ctrl.byteOffset + MSG * 4, MSG_BYTES);
  u8.fill(0);
  u8.set(bytes);
}

function loop(ctrl, kernels, index, seen) {
  for (;;) {
    Atomics.wait(ctrl, GEN, seen);
    const gen = Atomics.load(ctrl, GEN);
    if (gen === seen) continue;
    seen = gen;
    const cmd = Atomics.load(ctrl, CMD);
    if (cmd === CMD_EXIT) return;
    try {
      if (cmd === CMD_THROW) throw new Error(`injected failure in worker ${index}`);
      if (cmd === CMD_DIE) {
        if (isNode) process.exit(3);
        else self.close();
        return;
      }
      if (cmd === CMD_RUN) kernels.run_job(Atomics.load(ctrl, JOB), index);
    } catch (e) {
      if (Atomics.compareExchange(ctrl, ERR, 0, index + 1) === 0) writeMessage(ctrl, `worker ${index}: ${e && e.message ? e.message : String(e)}`);
    }
    if (Atomics.add(ctrl, DONE, 1) + 1 === Atomics.load(ctrl, NWORKERS)) Atomics.notify(ctrl, DONE);
  }
}

Comlink.expose(
  {
    /** Instantiates the module, claims a private stack, and starts the dispatch loop after replying. */
    async init({ module, memory, ctrlPtr, index, stackTop }) {
      const instance = await WebAssembly.instantiate(module, { env: { memory } });
      const kernels = instance.exports;
      kernels.__stack_pointer.value = stackTop;
      const ctrl = new Int32Array(memory.buffer, ctrlPtr, 64);
      const seen = Atomics.load(ctrl, GEN); // read before replying: no dispatch can be missed
      setTimeout(() => loop(ctrl, kernels, index, seen), 0);
      return true;
    },
  },
  endpoint,
);
