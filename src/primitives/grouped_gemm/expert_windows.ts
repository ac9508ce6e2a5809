import { dtBits } from '../../common/data_type.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { BindingLimits, RangeBinding } from '../matmul/binding_windows.js';

/**
 * A Proposal #3 expert whose src or dst buffer is larger than one storage binding on the gpu engine
 * (`maxStorageBufferBindingSize`, 128 MiB by default): its GEMM runs as several dispatches of the same
 * kernel, one per *row window* [rLo, rHi) of tile start rows (multiples of the expert's tile height),
 * each binding only the bytes of src and dst that its rows touch, from an offset aligned to
 * `minStorageBufferOffsetAlignment`. The kernel subtracts the element offset of each binding and skips
 * the tiles of other windows (gemm_rows.ts, dense mode), so every tile runs once, as in one dispatch.
 * The host knows only the rows the buffers hold (the runtime rows stay on the device): the windows
 * cover that capacity.
 */
export interface ExpertRowWindow {
  readonly rLo: number;
  readonly rHi: number;
  readonly src: RangeBinding;
  readonly dst: RangeBinding;
}

/** The most windows one expert may take before its execution is refused. */
const MAX_WINDOWS = 4096;

/** The bytes of rows [r0, r1) of a `[rows, cols]` tensor in a buffer of `bufferBytes`: offset aligned down, size in whole words. */
export function rowsBinding(md: MemoryDesc, r0: number, r1: number, align: number, bufferBytes: number): RangeBinding {
  const bits = dtBits(md.dataType);
  const [ld, cs] = md.strides;
  const startElem = r0 * ld, endElem = (r1 - 1) * ld + (md.dims[1] - 1) * cs + 1;
  // Whole u32 words: packed 16 / 8 / 4-bit lanes keep their place in the word.
  const a = Math.max(4, align);
  const offset = Math.floor(Math.floor((startElem * bits) / 8) / a) * a;
  const end = Math.min(bufferBytes, Math.ceil(Math.ceil((endElem * bits) / 8) / 4) * 4);
  return { offset, size: Math.max(4, end - offset), elemOffset: (offset * 8) / bits };
}

/**
 * The row windows of one expert: undefined when its src and dst buffers each fit one binding (the
 * whole buffers are bound), else the fewest windows of equal height that fit, or why there are none.
 */
export function planExpertWindows(src: { md: MemoryDesc; bytes: number }, dst: { md: MemoryDesc; bytes: number }, cap: number, tm: number, lim: BindingLimits): ExpertRowWindow[] | undefined | string {
  const max = lim.maxStorageBufferBindingSize, align = lim.minStorageBufferOffsetAlignment;
  if (src.bytes <= max && dst.bytes <= max) return undefined;
  const rowTiles = Math.max(1, Math.ceil(cap / tm));
  for (let n = 1; n <= Math.min(MAX_WINDOWS, rowTiles); n *= 2) {
    const rs = Math.ceil(rowTiles / n) * tm;
    const wins: ExpertRowWindow[] = [];
    for (let r = 0; r < Math.max(1, cap); r += rs) {
      const last = Math.max(r + 1, Math.min(cap, r + rs));
      wins.push({ rLo: r, rHi: r + rs, src: rowsBinding(src.md, r, last, align, src.bytes), dst: rowsBinding(dst.md, r, last, align, dst.bytes) });
    }
    if (wins.every((w) => w.src.size <= max && w.dst.size <= max)) return wins;
    if (n === rowTiles) break;
    if (2 * n > rowTiles) n = rowTiles / 2;
  }
  return `its src or dst rows do not fit one storage binding (maxStorageBufferBindingSize ${max} bytes) even in windows of ${tm} rows`;
}
