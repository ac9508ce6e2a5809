import { DnnlError } from '../common/status.js';

/**
 * Called first by every primitive descriptor that has no gpu implementation yet: a gpu engine is
 * refused as `unimplemented` at creation, before any rule reads cpu-engine state (its heap, kernels,
 * workers) that a gpu engine does not have. `engine` is typed loosely on purpose: the cpu-only pds
 * declare `Engine`, and JavaScript callers (or casts) can still hand them a gpu engine.
 */
export function refuseGpuEngine(engine: unknown, primitive: string): void {
  if ((engine as { kind?: unknown } | null | undefined)?.kind !== 'gpu') return;
  throw new DnnlError('unimplemented', `${primitive}: no implementation on the gpu engine yet (matmul, grouped_gemm, reorder, dynamic_quant and the moe forward stages and layer run there); create it on a cpu engine (Engine.create())`);
}
