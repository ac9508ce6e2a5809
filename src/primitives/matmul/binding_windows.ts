import { dtBits } from '../../common/data_type.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { MatmulProblem } from './problem.js';

/**
 * Tensors larger than one storage binding (`maxStorageBufferBindingSize`: 128 MiB by default, 1 GiB on
 * SwiftShader, 2 GiB on an H100; MoE-B's f32 weights are 1.5 GB). A matmul whose src, weights or dst
 * span more than one binding runs as several dispatches of the same kernel, one per *window*: a range
 * of experts (or batches) [eLo, eHi) times a range of tile start rows [rLo, rHi). Each dispatch binds
 * only the part of each buffer its window's tiles touch, from an offset aligned to
 * `minStorageBufferOffsetAlignment`; the kernel subtracts that element offset from its indices
 * (gemm_rows.ts) and skips the tiles of other windows. Every tile runs in exactly one window, so the
 * results are those of one dispatch, bit for bit.
 */

/** Elements [start, end) of a tensor's buffer. */
export interface ElemRange {
  readonly start: number;
  readonly end: number;
}

export interface BindingWindow {
  readonly eLo: number;
  readonly eHi: number;
  readonly rLo: number;
  readonly rHi: number;
  readonly src: ElemRange;
  readonly weights: ElemRange;
  readonly dst: ElemRange;
}

/** A binding of a range of a buffer: byte offset (aligned), byte size, and the element index at the offset. */
export interface RangeBinding {
  readonly offset: number;
  readonly size: number;
  readonly elemOffset: number;
}

export interface BindingLimits {
  readonly maxStorageBufferBindingSize: number;
  readonly minStorageBufferOffsetAlignment: number;
}

/** The most dispatches a split may take before the pd refuses the problem. */
const MAX_WINDOWS = 4096;

/** The bytes bound for elements `r` of type `md.dataType`: offset aligned down, size rounded up to a word. */
export function rangeBinding(md: MemoryDesc, r: ElemRange, align: number, bufferBytes: number): RangeBinding {
  const bits = dtBits(md.dataType);
  // The offset is a multiple of 4 bytes: whole u32 words, so packed 16 / 8 / 4-bit lanes keep their place.
  const a = Math.max(4, align);
  // Clamped by the descriptor's bytes (not the buffer's): the element offset is known when the executor is built.
  const startByte = Math.min(Math.floor((r.start * bits) / 8), Math.max(0, Math.floor(md.getSize(0) / 4) * 4 - 4));
  const offset = Math.floor(startByte / a) * a;
  const end = Math.min(bufferBytes, Math.ceil(Math.ceil((Math.max(r.end, r.start + 1) * bits) / 8) / 4) * 4);
  return { offset, size: Math.max(4, end - offset), elemOffset: (offset * 8) / bits };
}

/** Elements of the whole tensor. */
function whole(md: MemoryDesc): ElemRange {
  return { start: 0, end: md.spanElems };
}

/** Last element + 1 of a 2D block at `base` with `rows` x `cols` of strides s0, s1 (empty: base). */
function block(base: number, rows: number, s0: number, cols: number, s1: number): number {
  return rows <= 0 || cols <= 0 ? base : base + (rows - 1) * s0 + (cols - 1) * s1 + 1;
}

/**
 * The ranges a window's tiles touch: experts / batches [eLo, eHi) and tiles starting at rows [rLo, rHi)
 * (each reaching `tm` - 1 rows further), for each of src, weights and dst.
 */
function windowRanges(p: MatmulProblem, tm: number, eLo: number, eHi: number, rLo: number, rHi: number): BindingWindow {
  const { K, N, dstN } = p;
  // A grouped tile starts at any row (its group's offset); a dense one at a multiple of tm.
  const rEnd = Math.min(p.M, p.kind === 'grouped_m' ? rHi + tm - 1 : rHi);
  const rows = rEnd - rLo;
  const s = p.src.strides, w = p.weights.strides, d = p.dst.strides;
  if (p.kind === 'grouped_m') {
    const src = p.moe.gather ? whole(p.src) : { start: rLo * s[0], end: block(rLo * s[0], rows, s[0], K, s[1]) };
    const weights = { start: eLo * w[0], end: block(eLo * w[0], eHi - eLo, w[0], 1, 0) + block(0, K, w[1], N, w[2]) - 1 };
    const dst = p.moe.scatterTopK ? whole(p.dst) : { start: rLo * d[0], end: block(rLo * d[0], rows, d[0], dstN, d[1]) };
    return { eLo, eHi, rLo, rHi, src, weights, dst };
  }
  // dense: 2D, or 3D with a batch per z (a broadcast operand has stride 0 across batches).
  const nd = p.dst.ndims, batched = nd === 3;
  const sb = batched && p.src.dims[0] !== 1 ? s[0] : 0, wb = batched && p.weights.dims[0] !== 1 ? w[0] : 0, db = batched ? d[0] : 0;
  const [s0, s1] = [s[nd - 2], s[nd - 1]], [w0, w1] = [w[nd - 2], w[nd - 1]], [d0, d1] = [d[nd - 2], d[nd - 1]];
  // Batches [eLo, eHi): from the first batch's first element to the last batch's last one.
  const span = (b: number, stride0: number, r0: number, rs: number, c: number, stride1: number): ElemRange =>
    ({ start: eLo * b + r0 * stride0, end: (eHi - 1) * b + block(r0 * stride0, rs, stride0, c, stride1) });
  return {
    eLo, eHi, rLo, rHi,
    src: span(sb, s0, rLo, rows, K, s1),
    weights: span(wb, w0, 0, K, N, w1),
    dst: span(db, d0, rLo, rows, dstN, d1),
  };
}

/** Does every binding of the window fit? */
function fits(p: MatmulProblem, win: BindingWindow, lim: BindingLimits): boolean {
  const size = (md: MemoryDesc, r: ElemRange): number => rangeBinding(md, r, lim.minStorageBufferOffsetAlignment, Number.MAX_SAFE_INTEGER).size;
  return size(p.src, win.src) <= lim.maxStorageBufferBindingSize && size(p.weights, win.weights) <= lim.maxStorageBufferBindingSize &&
    size(p.dst, win.dst) <= lim.maxStorageBufferBindingSize;
}

function windowsOf(p: MatmulProblem, tm: number, groups: number, ge: number, rs: number): BindingWindow[] {
  const out: BindingWindow[] = [];
  for (let e = 0; e < Math.max(1, groups); e += ge) {
    for (let r = 0; r < Math.max(1, p.M); r += rs) out.push(windowRanges(p, tm, e, Math.min(groups, e + ge), r, r + rs));
  }
  return out;
}

/**
 * The windows of a problem on a device: undefined when src, weights and dst each fit one binding (the
 * plain kernel), else the fewest windows (experts / batches halved, then rows halved) whose bindings
 * all fit, or why there are none.
 */
export function planWindows(p: MatmulProblem, tm: number, lim: BindingLimits): BindingWindow[] | undefined | string {
  const max = lim.maxStorageBufferBindingSize;
  if ([p.src, p.weights, p.dst].every((md) => md.getSize(0) <= max)) return undefined;
  if (p.kind === 'grouped_k') return `a variable-K matmul with a src, weights or dst larger than one storage binding (${max} bytes) is not implemented on the gpu engine yet`;
  const groups = p.kind === 'grouped_m' ? p.moe.experts : (p.batch[0] ?? 1);
  const rowTiles = Math.max(1, Math.ceil(p.M / tm));
  for (let total = 1; total <= MAX_WINDOWS; total *= 2) {
    for (let gc = 1; gc <= total; gc *= 2) {
      const rc = total / gc;
      if (gc > 2 * Math.max(1, groups) || rc > 2 * rowTiles) continue;
      const ge = Math.max(1, Math.ceil(groups / gc)), rs = Math.max(1, Math.ceil(rowTiles / rc)) * tm;
      const wins = windowsOf(p, tm, groups, ge, rs);
      if (wins.every((w) => fits(p, w, lim))) return wins;
    }
  }
  const what = p.moe.gather ? 'the gathered src' : p.moe.scatterTopK ? 'the scattered dst' : 'one expert\'s (batch\'s) weights or one row tile';
  return `${what} does not fit one storage binding (maxStorageBufferBindingSize ${max} bytes) even split into ${MAX_WINDOWS} dispatches`;
}
