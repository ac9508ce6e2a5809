import { afterAll, beforeAll } from 'vitest';
import { existsSync } from 'node:fs';
import { Engine, GpuEngine } from '../src/index.js';

/**
 * The gpu engine the tests run on. Without a GPU driver, Dawn runs on SwiftShader's Vulkan (Debian's
 * chromium ships it): VK_ICD_FILENAMES points there unless the caller set it. No adapter is a test
 * failure, never a skip: CI must run every gpu test.
 */
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

export async function gpuEngine(): Promise<GpuEngine> {
  if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD)) process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  return Engine.create({ kind: 'gpu' });
}

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
