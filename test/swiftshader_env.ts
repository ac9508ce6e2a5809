import { existsSync } from 'node:fs';

/** The Vulkan ICD of SwiftShader, a CPU Vulkan that Debian's chromium ships (`dpkg -L chromium-common`). */
export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/**
 * Without a GPU driver Dawn finds no adapter: point the Vulkan loader at SwiftShader unless the caller
 * chose an ICD. Returns the environment it set, for child processes (the README's blocks run in one).
 */
export function useSwiftShaderWithoutDriver(): NodeJS.ProcessEnv {
  if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD)) process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  return process.env;
}
