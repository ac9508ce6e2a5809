import { DnnlError } from '../../common/status.js';
import type { Memory } from '../../memory/memory.js';

/**
 * Execute-time validation of the offsets of grouped arguments, done before any row is touched.
 * Returns a private copy, so later kernels read exactly what was validated.
 * Rules: offs[0] = 0, non-decreasing, offs[G] <= the descriptor's total extent, the offsets of all
 * grouped arguments equal (unless they share one buffer), and equal to host-known group sizes.
 */
export function checkedOffsets(primary: Memory, primaryName: string, others: ReadonlyArray<readonly [Memory, string]>): Int32Array {
  const offs = Int32Array.from(primary.offsets);
  const g = primary.desc.grouped;
  if (!g) throw new DnnlError('runtime_error', `${primaryName}: expected a grouped memory object`);
  const total = primary.desc.dims[g.variableDim];
  const G = g.groupCount;
  const fail = (msg: string): never => {
    throw new DnnlError('invalid_arguments', msg);
  };
  if (offs[0] !== 0) fail(`${primaryName} offsets[0] must be 0, got ${offs[0]}`);
  for (let i = 1; i <= G; i++) {
    if (offs[i] < offs[i - 1]) fail(`${primaryName} offsets must be non-decreasing: offsets[${i}] = ${offs[i]} < offsets[${i - 1}] = ${offs[i - 1]}`);
  }
  if (offs[G] > total) fail(`${primaryName} offsets[${G}] = ${offs[G]} exceeds the total extent ${total} of dims[${g.variableDim}]`);
  // Host-known sizes may come from any grouped argument (e.g. a per-group dst sharing a runtime src's offsets).
  const groupSizes = g.groupSizes ?? others.map(([m]) => m.desc.grouped?.groupSizes).find((s) => s !== undefined);
  if (groupSizes) {
    for (let i = 0; i < G; i++) {
      const want = groupSizes[i];
      if (offs[i + 1] - offs[i] !== want) fail(`${primaryName} offsets give group ${i} ${offs[i + 1] - offs[i]} rows but the descriptor's per-group dims say ${want}`);
    }
  }
  for (const [mem, name] of others) {
    if (mem.handles[1] === primary.handles[1]) continue;
    const o = mem.offsets;
    for (let i = 0; i <= G; i++) {
      if (o[i] !== offs[i]) fail(`${name} offsets must equal ${primaryName} offsets: ${name} offsets[${i}] = ${o[i]}, ${primaryName} offsets[${i}] = ${offs[i]}`);
    }
  }
  return offs;
}
