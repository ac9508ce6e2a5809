import { check, checkImpl } from '../../common/status.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import { PrimitiveAttr } from '../../attr/primitive_attr.js';
import { FLOAT_TYPES } from '../../attr/fusion.js';
import { PrimitiveDesc as MatmulPd } from '../matmul/pd.js';

/**
 * Guard clauses shared by the backward pds, one rule per call, each message naming the argument.
 * `fn` prefixes messages (`matmul_backward_data`, ...).
 */

/** `any` activations resolve to row-major, as in the forward. */
export function rowMajor(md: MemoryDesc): MemoryDesc {
  if (md.format !== 'any') return md;
  return new MemoryDesc({ dims: md.dims, dataType: md.dataType, format: 'blocked', strides: tagToStrides('abcdefghijkl'.slice(0, md.ndims), md.dims, 'matmul') });
}

export function checkMd(fn: string, name: string, md: unknown): asserts md is MemoryDesc {
  check(md instanceof MemoryDesc, `${fn}: ${name} must be a memory descriptor`);
}

/** f32 / bf16 / f16 only: the backward accumulates in f32 on the f32 microkernel. */
export function checkFloat(fn: string, name: string, md: MemoryDesc): void {
  checkImpl(FLOAT_TYPES.includes(md.dataType), `${fn}: ${name} data type ${md.dataType} is not supported (f32, bf16, f16)`);
}

/** No scales, zero points or post-ops: a backward pass has none of the forward's quantization. */
export function checkPlainAttr(fn: string, attr: PrimitiveAttr): void {
  check(attr instanceof PrimitiveAttr, `${fn}: attr must be a PrimitiveAttr`);
  checkImpl(attr.scalesArgs.length === 0 && attr.zeroPointsArgs.length === 0, `${fn}: scales and zero points are not supported`);
  checkImpl(attr.postOps.entries.length === 0, `${fn}: post-ops are not supported`);
  const m = attr.moeRows;
  checkImpl(!m.gather && !m.scatterTopK && !m.batchedCounts, `${fn}: gather, scatter and batched token counts are not supported`);
  checkImpl(!m.zeroFillUngrouped && !m.expertMap, `${fn}: zero-filled ungrouped rows and expert maps are not supported`);
}

/** Rows grouped by a grouped descriptor (P#1): 2D, variable dim 0, s32 offsets, `G` groups. */
export function checkGroupedRows(fn: string, name: string, md: MemoryDesc, G: number, cols: number, colsName: string): void {
  check(md.isGrouped && md.grouped?.variableDim === 0, `${fn}: ${name} must be grouped by rows (memory.desc.grouped([total_M, ${colsName}], dt, G, [RUNTIME_DIM_VAL, ${colsName}])), got ${md}`);
  check(md.ndims === 2, `${fn}: ${name} must be 2D [total_M, ${colsName}], got ${md.ndims} dims`);
  check(md.grouped!.groupCount === G, `${fn}: ${name} group count ${md.grouped!.groupCount} must equal the weights' G = ${G}`);
  check(md.grouped!.offsetsDt === 's32', `${fn}: ${name} offsets data type ${md.grouped!.offsetsDt} is not supported (s32)`);
  check(md.dims[1] === cols, `${fn}: ${name} dims[1] = ${md.dims[1]} must equal ${colsName} = ${cols}`);
}

/** Proposal #2 rows: a plain 2D `[total_M, cols]` tensor. */
export function checkPlainRows(fn: string, name: string, md: MemoryDesc, cols: number, colsName: string): void {
  check(!md.isGrouped && md.format === 'blocked', `${fn}: with the grouped-offsets attribute, ${name} must be a plain descriptor, got ${md}`);
  check(md.ndims === 2, `${fn}: ${name} must be 2D [total_M, ${colsName}], got ${md.ndims} dims`);
  check(md.dims[1] === cols, `${fn}: ${name} dims[1] = ${md.dims[1]} must equal ${colsName} = ${cols}`);
}

/** Both row tensors partition the same rows: equal totals and, when host-known, equal per-group sizes. */
export function checkSameRows(fn: string, a: [string, MemoryDesc], b: [string, MemoryDesc]): void {
  check(a[1].dims[0] === b[1].dims[0], `${fn}: ${b[0]} dims[0] = ${b[1].dims[0]} must equal ${a[0]} dims[0] = ${a[1].dims[0]} (the same routed rows)`);
  const sa = a[1].grouped?.groupSizes, sb = b[1].grouped?.groupSizes;
  check(!sa || !sb || sa.every((v, i) => v === sb[i]), `${fn}: ${a[0]} and ${b[0]} per-group dims differ`);
}

/**
 * The forward hint (oneDNN's `hint_fwd_pd`), when given: a grouped variable-M matmul of the same
 * shape. groupdnn needs nothing from it; it is checked so a mismatched pair fails at creation.
 */
export function checkHint(fn: string, hint: MatmulPd | undefined, G: number, M: number, K: number, N: number): void {
  if (hint === undefined) return;
  check(hint instanceof MatmulPd, `${fn}: hint_fwd_pd must be a matmul.PrimitiveDesc`);
  const p = hint.problem;
  check(p.kind === 'grouped_m', `${fn}: hint_fwd_pd must be a grouped variable-M matmul, got a ${p.kind} one`);
  check(p.G === G && p.M === M && p.K === K && p.N === N, `${fn}: hint_fwd_pd shape g${p.G} m${p.M} k${p.K} n${p.N} differs from this problem's g${G} m${M} k${K} n${N}`);
}
