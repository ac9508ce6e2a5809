import { Engine, GpuEngine } from '../src/index.js';
import { useSwiftShaderWithoutDriver } from './swiftshader_env.js';

/**
 * The gpu engine the tests run on. Without a GPU driver, Dawn runs on SwiftShader's Vulkan (Debian's
 * chromium ships it): VK_ICD_FILENAMES points there unless the caller set it. No adapter is a test
 * failure, never a skip: CI must run every gpu test.
 */
export async function gpuEngine(): Promise<GpuEngine> {
  useSwiftShaderWithoutDriver();
  return Engine.create({ kind: 'gpu' });
}

