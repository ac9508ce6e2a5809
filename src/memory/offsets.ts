import { check } from '../common/status.js';

/**
 * Offsets conventions. The canonical buffer (RFC Proposal #1) has G+1 entries `[0, M0, M0+M1, ...]`.
 * Other systems use:
 *  - ends: G cumulative ends `[M0, M0+M1, ...]` (PyTorch `_grouped_mm` `offs`, oneDNN's merged grouped memory);
 *  - starts: G first rows `[0, M0, ...]` (cuDNN `first_token_offset`), the total given separately;
 *  - sizes: G per-group extents `[M0, M1, ...]` (OpenVINO `tokens_lens_per_expert`, vLLM `expert_num_tokens`).
 * Every converter validates its input and can write into `out` (e.g. a memory object's offsets view),
 * which must have exactly G+1 entries.
 */

const INT32_MAX = 0x7fffffff;

/** `out` must have exactly G+1 entries: a longer one would keep a stale last entry that a GEMM then reads as the total. */
function output(out: Int32Array | undefined, length: number, fn: string): Int32Array {
  if (!out) return new Int32Array(length);
  check(out instanceof Int32Array, `${fn}: out must be an Int32Array (e.g. a memory object's offsets view)`);
  check(out.length === length, `${fn}: out has ${out.length} entries, must have exactly ${length} (G + 1 for G = ${length - 1} groups)`);
  return out;
}

/** `input` read before `out` is written: a copy when they share a buffer (sizes written into an offsets view, then converted in place). */
function unaliased(input: ArrayLike<number>, out: Int32Array): ArrayLike<number> {
  return ArrayBuffer.isView(input) && input.buffer === out.buffer ? Array.from(input) : input;
}

function checkEntry(v: number, i: number, name: string, fn: string): void {
  check(Number.isInteger(v) && v >= 0 && v <= INT32_MAX, `${fn}: ${name}[${i}] must be an integer in [0, 2^31-1], got ${v}`);
}

/** Validates a canonical (G+1) offsets array: starts at 0, non-decreasing, last <= total (when given). */
export function validateOffsets(offs: ArrayLike<number>, total?: number, name = 'offsets'): void {
  check(offs.length >= 1, `${name}: needs at least one entry`);
  check(offs[0] === 0, `${name}[0] must be 0, got ${offs[0]}`);
  for (let i = 1; i < offs.length; i++) {
    checkEntry(offs[i], i, name, 'validateOffsets');
    check(offs[i] >= offs[i - 1], `${name} must be non-decreasing: ${name}[${i}] = ${offs[i]} < ${name}[${i - 1}] = ${offs[i - 1]}`);
  }
  if (total !== undefined) check(offs[offs.length - 1] <= total, `${name}[${offs.length - 1}] = ${offs[offs.length - 1]} exceeds the total extent ${total}`);
}

/** sizes (G) -> canonical offsets (G+1). */
export function fromSizes(sizes: ArrayLike<number>, out?: Int32Array): Int32Array {
  const fn = 'offsets.fromSizes';
  const o = output(out, sizes.length + 1, fn);
  let acc = 0;
  for (let i = 0; i < sizes.length; i++) {
    checkEntry(sizes[i], i, 'sizes', fn);
    acc += sizes[i];
    check(acc <= INT32_MAX, `${fn}: the sum of sizes exceeds 2^31-1 at sizes[${i}]`);
  }
  acc = 0;
  const sz = unaliased(sizes, o);
  o[0] = 0;
  for (let i = 0; i < sz.length; i++) o[i + 1] = acc += sz[i];
  return o;
}

/** cumulative ends (G, PyTorch `offs`) -> canonical offsets (G+1). */
export function fromEnds(ends: ArrayLike<number>, out?: Int32Array): Int32Array {
  const fn = 'offsets.fromEnds';
  for (let i = 0; i < ends.length; i++) {
    checkEntry(ends[i], i, 'ends', fn);
    check(i === 0 || ends[i] >= ends[i - 1], `${fn}: ends must be non-decreasing: ends[${i}] = ${ends[i]} < ends[${i - 1}] = ${ends[i - 1]}`);
  }
  const o = output(out, ends.length + 1, fn);
  const e = unaliased(ends, o);
  o[0] = 0;
  for (let i = 0; i < e.length; i++) o[i + 1] = e[i];
  return o;
}

/** Options of `offsets.fromStarts` (every accepted key is listed here). */
export interface FromStartsOptions {
  /**
   * Let the first group start after row 0 (cuDNN's none mode: rows before `starts[0]` belong to no
   * group; a matmul with `attr.setZeroFillUngroupedRows()` zero-fills them). Default false: starts[0] must be 0.
   */
  readonly leadingRows?: boolean;
}

/** first-row starts (G, cuDNN `first_token_offset`) + total rows -> canonical offsets (G+1). */
export function fromStarts(starts: ArrayLike<number>, total: number, out?: Int32Array, opts: FromStartsOptions = {}): Int32Array {
  const fn = 'offsets.fromStarts';
  checkEntry(total, 0, 'total', fn);
  check(opts !== null && typeof opts === 'object' && (opts.leadingRows === undefined || typeof opts.leadingRows === 'boolean'), `${fn}: options must be an object { leadingRows?: boolean }`);
  const leading = opts.leadingRows ?? false;
  for (let i = 0; i < starts.length; i++) {
    checkEntry(starts[i], i, 'starts', fn);
    check(i > 0 || leading || starts[0] === 0, `${fn}: starts[0] must be 0, got ${starts[0]} (pass { leadingRows: true } for rows before the first group)`);
    check(i === 0 || starts[i] >= starts[i - 1], `${fn}: starts must be non-decreasing: starts[${i}] = ${starts[i]} < starts[${i - 1}] = ${starts[i - 1]}`);
  }
  check(starts.length > 0 || total === 0, `${fn}: with no starts (G = 0) total must be 0, got ${total}`);
  check(starts.length === 0 || starts[starts.length - 1] <= total, `${fn}: starts[${starts.length - 1}] = ${starts[starts.length - 1]} exceeds total ${total}`);
  const o = output(out, starts.length + 1, fn);
  const st = unaliased(starts, o);
  for (let i = 0; i < st.length; i++) o[i] = st[i];
  o[starts.length] = total;
  return o;
}

/** canonical offsets (G+1) -> sizes (G). */
export function toSizes(offs: ArrayLike<number>): Int32Array {
  validateOffsets(offs, undefined, 'offsets.toSizes: offsets');
  const r = new Int32Array(offs.length - 1);
  for (let i = 0; i < r.length; i++) r[i] = offs[i + 1] - offs[i];
  return r;
}

/** canonical offsets (G+1) -> cumulative ends (G). */
export function toEnds(offs: ArrayLike<number>): Int32Array {
  validateOffsets(offs, undefined, 'offsets.toEnds: offsets');
  return Int32Array.from({ length: offs.length - 1 }, (_, i) => offs[i + 1]);
}

/** canonical offsets (G+1) -> first-row starts (G); the total is `offs[G]`. */
export function toStarts(offs: ArrayLike<number>): Int32Array {
  validateOffsets(offs, undefined, 'offsets.toStarts: offsets');
  return Int32Array.from({ length: offs.length - 1 }, (_, i) => offs[i]);
}

export const offsets = { fromSizes, fromEnds, fromStarts, toSizes, toEnds, toStarts, validate: validateOffsets };
