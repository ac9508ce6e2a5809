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

