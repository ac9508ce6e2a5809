import type { GpuEngine } from './gpu_engine.js';

/**
 * Workgroups `[x, y]` for `invocations` one-dimensional invocations in workgroups of `size`, folded
 * into y past the device's per-dimension limit; a kernel recovers its flat index as
 * `(workgroup_id.y * num_workgroups.x + workgroup_id.x) * size + local_invocation_index` and returns
 * past the end. `[0, 0]` for no invocations.
 */
export function workgroupGrid(eng: GpuEngine, invocations: number, size: number): [number, number] {
  const wg = Math.ceil(invocations / size);
  const x = Math.min(wg, eng.caps.maxComputeWorkgroupsPerDimension);
  return [x, x === 0 ? 0 : Math.ceil(wg / x)];
}
