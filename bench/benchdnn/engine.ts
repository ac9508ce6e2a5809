/** Engine selection: the one place the driver turns `--engine` / `--ctx-exe` into a groupdnn engine. */
import { Engine, GpuMemory, Memory, type GpuEngine, type MemoryDesc } from '../../src/index.js';

export type EngineKind = 'cpu' | 'gpu';

/** Either engine kind, and memory objects of either. */
export type AnyEngine = Engine | GpuEngine;
export type AnyMemory = Memory | GpuMemory;
/** Buffers of a memory object to wrap (`undefined` allocates that one): heap handles or GPUBuffers. */
export type AnyHandles = readonly (AnyMemory['handles'][number] | undefined)[];

/**
 * `--engine=gpu` is groupdnn's WebGPU engine (in Node through the optional `webgpu` package; without a
 * GPU driver point VK_ICD_FILENAMES at a Vulkan ICD such as SwiftShader's). `--ctx-exe` sets the cpu
 * engine's threads and has no meaning on the gpu engine.
 */
export async function createEngine(kind: EngineKind, threads: number | undefined): Promise<AnyEngine> {
  if (kind === 'gpu') return Engine.create({ kind: 'gpu' });
  return Engine.create(threads === undefined ? {} : { threads });
}

/** `Memory.create` on either engine kind (the handles are of that kind: shared offsets buffers). */
export function createMemory(md: MemoryDesc, eng: AnyEngine, handles?: AnyHandles): AnyMemory {
  if (eng.kind === 'gpu') return GpuMemory.create(md, eng, handles as readonly (GPUBuffer | undefined)[] | undefined);
  return Memory.create(md, eng, handles as readonly (number | undefined)[] | undefined);
}
