import { DnnlError } from '../../common/status.js';

/** Where a gpu engine's device came from, for `engine.info` and error messages. */
export type DeviceSource = 'caller' | 'navigator.gpu' | 'webgpu (Dawn, Node)';

export interface AcquiredDevice {
  readonly device: GPUDevice;
  /**
   * The GPU instance and adapter the device came from. The engine holds them: in Dawn's Node bindings a
   * collected instance takes the device's event processing with it (segfaults and futex aborts, seen
   * on SwiftShader and on an H200, whenever a GC ran while the device was in use).
   */
  readonly owners: readonly unknown[];
  readonly adapterInfo: string;
  readonly source: DeviceSource;
}

const HOW_TO =
  'a gpu engine needs WebGPU: in a browser, a secure context (https or localhost) with navigator.gpu; in Node, ' +
  "`npm install webgpu` (Dawn's Node bindings; on a machine without a GPU driver point VK_ICD_FILENAMES at a " +
  'Vulkan ICD such as SwiftShader), or pass your own GPUDevice as Engine.create({ kind: \'gpu\', device })';

/** Debian's chromium ships SwiftShader, a CPU Vulkan that Dawn accepts. */
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/**
 * Node without an adapter: the Vulkan ICD to name (the path where SwiftShader's is installed), or
 * what VK_ICD_FILENAMES held. undefined elsewhere (a browser; or nothing to say beyond HOW_TO).
 */
function vulkanHint(): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined>; getBuiltinModule?: (id: string) => unknown } }).process;
  if (!isNode() || !proc) return undefined;
  const icd = proc.env?.VK_ICD_FILENAMES;
  if (icd) return `VK_ICD_FILENAMES=${icd} gave Dawn no adapter (is it a Vulkan ICD file whose driver loads here?); ${HOW_TO}`;
  const fs = proc.getBuiltinModule?.('node:fs') as { existsSync?: (p: string) => boolean } | undefined;
  if (fs?.existsSync?.(SWIFTSHADER_ICD)) return `no GPU driver answered and VK_ICD_FILENAMES is not set: this machine has SwiftShader's CPU Vulkan, run with VK_ICD_FILENAMES=${SWIFTSHADER_ICD}`;
  return undefined;
}

function isNode(): boolean {
  return (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node !== undefined;
}

let dawnGpu: GPU | undefined;

/** `navigator.gpu` in browsers (and Node builds that have it), else the `webgpu` package in Node. */
async function findGpu(): Promise<{ gpu: GPU; source: DeviceSource }> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu) return { gpu: nav.gpu, source: 'navigator.gpu' };
  if (isNode()) {
    let mod: { create: (flags: string[]) => GPU; globals?: object };
    try {
      // A variable specifier keeps bundlers from resolving the optional peer dependency.
      const name = 'webgpu';
      mod = (await import(/* @vite-ignore */ /* webpackIgnore: true */ name)) as typeof mod;
    } catch (e) {
      throw new DnnlError('unimplemented', `Engine.create({ kind: 'gpu' }): the 'webgpu' package could not be loaded (${e instanceof Error ? e.message : String(e)}); ${HOW_TO}`);
    }
    // Dawn's Node bindings need the WebGPU globals (GPUBufferUsage, ...) that browsers define.
    if (mod.globals && (globalThis as { GPUBufferUsage?: unknown }).GPUBufferUsage === undefined) Object.assign(globalThis, mod.globals);
    // One Dawn instance per process, kept reachable: if the GPU object were collected while a device
    // it created lives, Dawn tears the instance down under it and the process aborts.
    // GROUPDNN_DAWN_FLAGS: Dawn's own flags, space-separated (e.g. 'disable-dawn-features=timestamp_quantization').
    const flags = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.GROUPDNN_DAWN_FLAGS;
    dawnGpu ??= mod.create(flags ? flags.split(' ').filter((f) => f.length > 0) : []);
    return { gpu: dawnGpu, source: 'webgpu (Dawn, Node)' };
  }
  throw new DnnlError('unimplemented', `Engine.create({ kind: 'gpu' }): this runtime has no navigator.gpu; ${HOW_TO}`);
}

function describeAdapter(a: GPUAdapter): string {
  const i = a.info as Partial<GPUAdapterInfo> | undefined;
  const parts = [i?.vendor, i?.architecture, i?.device, i?.description].filter((s): s is string => typeof s === 'string' && s.length > 0);
  return parts.length ? parts.join(' ') : 'unknown adapter';
}

/** Optional features the kernels use where the adapter has them. */
const WANTED: readonly GPUFeatureName[] = ['shader-f16', 'timestamp-query'];

/**
 * Requests an adapter and a device with the adapter's largest storage-buffer limits (the defaults,
 * 128 MiB per binding, are far below what MoE weights need) and the optional features it has.
 */
export async function acquireDevice(powerPreference: 'low-power' | 'high-performance' | undefined): Promise<AcquiredDevice> {
  const { gpu, source } = await findGpu();
  const adapter = await gpu.requestAdapter(powerPreference ? { powerPreference } : undefined);
  if (!adapter) throw new DnnlError('unimplemented', `Engine.create({ kind: 'gpu' }): ${source} returned no adapter; ${vulkanHint() ?? HOW_TO}`);
  const l = adapter.limits;
  // The limits the kernels need above the defaults: MoE weights exceed the 128 MiB binding default, a
  // fused matmul binds scales, zero points and binary inputs beside its operands, and the f32 prefill
  // GEMM stages larger K slices where the adapter has more workgroup memory than the 16 KiB default.
  const requiredLimits: Record<string, number> = {
    maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
    maxBufferSize: Math.min(l.maxBufferSize, 2 ** 40),
    maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
    maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
  };
  const requiredFeatures = WANTED.filter((f) => adapter.features.has(f));
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
  } catch (e) {
    throw new DnnlError('runtime_error', `Engine.create({ kind: 'gpu' }): requestDevice failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  return { device, adapterInfo: describeAdapter(adapter), source, owners: [gpu, adapter] };
}
