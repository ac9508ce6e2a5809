import { DnnlError } from '../../common/status.js';
import type { Memory } from '../../memory/memory.js';
import { RUNTIME_SIZE_VAL, type MemoryDesc } from '../../memory/desc.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import { dtBits } from '../../common/data_type.js';

/**
 * Rows that fit in an expert's buffer: its descriptor has a runtime M, so the bound is the heap allocation
 * the handle points into, and a view's `capacityBytes` within it (checked again here: the allocation a
 * view was made over may have been freed and its address reused by a smaller one). The kernel checks each
 * runtime M against min(src, dst) capacity. Works for `[RUNTIME_DIM_VAL, cols]` and `[RUNTIME_DIM_VAL]`
 * (per-row values) descriptors of any type.
 */
export function rowCapacity(m: Memory): number {
  const block = m.engine.heap.owningBlock(m.handles[0], 0);
  if (!block) return 0;
  const inBlock = block.start + block.size - m.handles[0];
  return rowsFitting(m.desc, m.capacityBytes === undefined ? inBlock : Math.min(m.capacityBytes, inBlock));
}

/** The same rule on a gpu engine: the bound is the bytes of the memory's `GPUBuffer`. */
export function gpuRowCapacity(m: GpuMemory): number {
  return rowsFitting(m.desc, m.byteSizes[0]);
}

/** Rows of a runtime-M descriptor that fit in `avail` bytes (the last row needs only its used columns). */
export function rowsFitting(md: MemoryDesc, avail: number): number {
  const cols = md.ndims === 2 ? md.dims[1] : 1;
  if (cols === 0) return 0x7fffffff;
  // Elements that fit (4-bit types hold two per byte); a row starts every strides[0] elements.
  const elems = Math.floor((avail * 8) / dtBits(md.dataType));
  const lastRow = md.ndims === 2 ? (cols - 1) * md.strides[1] + 1 : 1;
  if (elems < lastRow) return 0;
  return Math.min(0x7fffffff, Math.floor((elems - lastRow) / md.strides[0]) + 1);
}

export const DIMS_ERR = { negative: 6, capacity: 7 } as const;

/** `fn` prefixes the message (the backward primitives name themselves); `rows` names the row tensors. */
export function runtimeDimsError(code: number, i: number, x: number, y: number, fn = '', rows = 'src/dst'): DnnlError {
  const at = fn ? `${fn}: ` : '';
  if (code === DIMS_ERR.negative) return new DnnlError('invalid_arguments', `${at}ARG.RUNTIME_DIMS[${i}] = ${x} must be non-negative`);
  if (code === DIMS_ERR.capacity) return new DnnlError('invalid_arguments', `${at}ARG.RUNTIME_DIMS[${i}] = ${x} rows do not fit expert ${i}'s ${rows} allocations (${y} rows fit)`);
  return new DnnlError('runtime_error', `${fn || 'grouped_gemm'}: kernel status ${code}`);
}

/** Host-side validation (reference path): same rules, same messages as the kernel. `capacity` is asked of non-empty experts only (none fits fewer than 0 rows). */
export function checkedRuntimeDims(dims: Int32Array, capacity: (i: number) => number): Int32Array {
  const m = Int32Array.from(dims);
  for (let i = 0; i < m.length; i++) {
    if (m[i] < 0) throw runtimeDimsError(DIMS_ERR.negative, i, m[i], 0);
    if (m[i] === 0) continue;
    const cap = capacity(i);
    if (m[i] > cap) throw runtimeDimsError(DIMS_ERR.capacity, i, m[i], cap);
  }
  return m;
}

export { RUNTIME_SIZE_VAL };
