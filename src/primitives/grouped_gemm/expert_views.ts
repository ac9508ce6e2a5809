import { check, checkImpl } from '../../common/status.js';
import { RUNTIME_DIM_VAL } from '../../common/dims.js';
import { dtBytes, isSubByteType } from '../../common/data_type.js';
import { plainDesc, type MemoryDesc } from '../../memory/desc.js';
import { Memory } from '../../memory/memory.js';
import { refuseGpuEngine } from '../gpu_refusal.js';

/**
 * Each source descriptor's view descriptor, made once (descriptors are immutable): the views of every call
 * share it, so a primitive matches it by identity after its first execute instead of comparing it per expert.
 */
const viewDescs = new WeakMap<MemoryDesc, MemoryDesc>();

/**
 * The RFC's "Frameworks Compatibility" mapping: zero-copy per-expert views `[RUNTIME_DIM_VAL, K]` over
 * a contiguous `[total, K]` buffer (plain or grouped memory), one per group, starting at the host-side
 * offsets `offs` (G+1 entries). The views alias `mem`; they need rebuilding whenever the offsets move.
 */
export function expertViews(mem: Memory, offs: ArrayLike<number>): Memory[] {
  // A GpuMemory owns whole GPUBuffers: it has no views at a byte offset (bind one buffer per expert).
  refuseGpuEngine((mem as { engine?: unknown } | undefined)?.engine, 'expertViews');
  const md = mem.desc;
  check(md.ndims === 2 && md.format !== 'packed', 'expertViews: needs a 2D [total, K] memory');
  check(md.strides[1] === 1, 'expertViews: rows must be contiguous (row-major)');
  check(offs.length >= 2, 'expertViews: offsets need G+1 >= 2 entries');
  const [total, K] = md.dims;
  // 4-bit types pack two elements per byte: every view must start on a byte.
  checkImpl(!isSubByteType(md.dataType) || md.strides[0] % 2 === 0, `expertViews: ${md.dataType} rows of ${md.strides[0]} elements do not start on byte boundaries`);
  const row = dtBytes(md.dataType, md.strides[0]);
  let viewMd = viewDescs.get(md);
  if (!viewMd) viewDescs.set(md, (viewMd = plainDesc([RUNTIME_DIM_VAL, K], md.dataType, 'ab')));
  // A [RUNTIME_DIM_VAL, K] view steps K elements per row: padded rows would be misread.
  check(md.strides[0] === viewMd.strides[0], `expertViews: rows must be contiguous (row stride ${md.strides[0]} != K = ${K})`);
  let last = 0;
  for (let g = 0; g < offs.length; g++) {
    if (!(Number.isInteger(offs[g]) && offs[g] >= 0 && offs[g] <= total)) check(false, `expertViews: offsets[${g}] = ${offs[g]} is outside [0, ${total}]`);
    last = Math.max(last, offs[g]);
  }
  // The views lie inside one live allocation when the rows up to the last one do (the common case: the
  // views skip Memory.create's checks of each); else Memory.create says which one does not.
  const inside = mem.engine.heap.owningBlock(mem.handles[0], last * row) !== undefined;
  const out: Memory[] = [];
  for (let g = 0; g + 1 < offs.length; g++) {
    if (offs[g + 1] < offs[g]) check(false, `expertViews: offsets must be non-decreasing at [${g + 1}]`);
    // Each view may hold only its own slice: a runtime M beyond it is rejected, never written.
    const h = mem.handles[0] + offs[g] * row, capacityBytes = (offs[g + 1] - offs[g]) * row;
    out.push(inside ? Memory.checkedView(viewMd, mem.engine, h, capacityBytes) : Memory.create(viewMd, mem.engine, h, { capacityBytes }));
  }
  return out;
}
