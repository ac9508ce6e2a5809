import type { MemoryDesc } from '../../memory/desc.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';

/**
 * Packed weights layouts the gpu engine can reorder into, by `PackedLayout.name`: one entry per layout
 * a gpu matmul / grouped_gemm impl answers for `tag.any` weights. Today those answer plain row-major
 * weights (webgpu_matmul.ts, webgpu_grouped_gemm.ts), so the table is empty and a packed dst on a gpu
 * engine is `unimplemented`; a gpu packed layout adds its packer here and nothing else changes.
 */
export interface GpuPacker {
  /** Why this packer cannot fill `dst` from `src` (undefined: it can). */
  reject(src: MemoryDesc, dst: MemoryDesc, eng: GpuEngine): string | undefined;
  /** Records the packing of device buffer `from` (plain `src`) into `to` (`dst`) on the open encoder. */
  record(eng: GpuEngine, src: MemoryDesc, from: GPUBuffer, dst: MemoryDesc, to: GPUBuffer): void;
}

export const GPU_PACKERS: ReadonlyMap<string, GpuPacker> = new Map<string, GpuPacker>();
