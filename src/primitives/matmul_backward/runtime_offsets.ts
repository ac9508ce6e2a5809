import { DnnlError } from '../../common/status.js';
import type { Memory } from '../../memory/memory.js';
import { ARG, argName } from '../args.js';
import { checkedOffsets, offsetsError, type Grouping, type OffsetsArg } from '../matmul/runtime_offsets.js';

/**
 * Execute-time offsets of a backward primitive (and of moe.activation), checked with the forward's rules, order and wording
 * (offs[0] = 0, non-decreasing, offs[G] <= total rows, host-known sizes, the second grouped tensor's
 * offsets equal to the first's unless they are one buffer), but naming the backward's arguments
 * (`ARG.SRC`, `ARG.DIFF_DST`, `ARG.DIFF_SRC`, `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`).
 */
export function rowsGrouping(G: number, total: number, primary: [Memory, number], other: [Memory, number] | undefined, attrOffsets: Memory | undefined): Grouping {
  const arg = ([m, id]: [Memory, number]): OffsetsArg => ({ name: argName(id), handle: m.handles[1], view: m.offsets });
  const sizes = primary[0].desc.grouped?.groupSizes ?? other?.[0].desc.grouped?.groupSizes;
  if (attrOffsets) {
    const primaryArg = { name: argName(ARG.ATTR_GROUPED_OFFSETS | ARG.SRC), handle: attrOffsets.handles[0], view: attrOffsets.values as Int32Array };
    return { primary: primaryArg, others: [], G, total, variableDim: 0, sizes: undefined };
  }
  return { primary: arg(primary), others: other ? [arg(other)] : [], G, total, variableDim: 0, sizes };
}

/** The error for a kernel verdict (codes of wasm/src/job.h), prefixed with the primitive's name. */
export function bwdOffsetsError(fn: string, g: Grouping, code: number, i: number, x: number, y: number): DnnlError {
  const e = offsetsError(g, code, i, x, y);
  return new DnnlError(e.status, `${fn}: ${e.message.slice(e.status.length + 2)}`);
}

/** Host-side twin of the kernel's check (reference path): the same verdicts and messages. */
export function checkedBwdOffsets(fn: string, g: Grouping): Int32Array {
  try {
    return checkedOffsets(g);
  } catch (e) {
    if (e instanceof DnnlError) throw new DnnlError(e.status, `${fn}: ${e.message.slice(e.status.length + 2)}`);
    throw e;
  }
}
