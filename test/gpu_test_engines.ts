// Vitest hooks: test files only (gpu_helpers.ts stays importable from the benches).
import { afterAll, beforeAll } from 'vitest';
import { Engine, Stream, type GpuEngine } from '../src/index.js';
import { gpuEngine } from './gpu_helpers.js';

/**
 * A gpu engine and a one-thread cpu engine for the tests of one file, created before its tests and
 * released after them: the cpu engine gives the bits the gpu engine's results are compared with.
 * `set` receives both once created (vitest hooks cannot return values into the file's scope).
 */
export function useGpuAndCpuEngines(set: (gpu: GpuEngine, cpu: Engine) => void): void {
  let pair: [GpuEngine, Engine] | undefined;
  beforeAll(async () => {
    pair = [await gpuEngine(), await Engine.create({ threads: 1 })];
    set(...pair);
  });
  afterAll(() => {
    pair?.[0].release();
    pair?.[1].release();
  });
}

/** A gpu engine and a stream on it for the tests of one file (`set` receives both once created), released after them. */
export function useGpuEngine(set: (eng: GpuEngine, strm: Stream) => void): void {
  let eng: GpuEngine | undefined;
  beforeAll(async () => {
    eng = await gpuEngine();
    set(eng, new Stream(eng));
  });
  afterAll(() => eng?.release());
}
