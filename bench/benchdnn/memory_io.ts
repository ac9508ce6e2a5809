/**
 * All host access to memory objects goes through here, with `await` around every read and write so
 * the same code serves the cpu engine (synchronous views) and the gpu engine (mapped buffers, async).
 * Values are passed in logical row-major order; the descriptor's strides place them.
 */
import { GpuMemory, offsets, type MemoryDesc } from '../../src/index.js';
import type { AnyMemory } from './engine.js';

function isRowMajor(md: MemoryDesc): boolean {
  let s = 1;
  for (let i = md.dims.length - 1; i >= 0; i--) {
    if (md.dims[i] > 1 && md.strides[i] !== s) return false;
    s *= md.dims[i];
  }
  return true;
}

/** Physical position of each logical (row-major) element. */
function physicalIndex(md: MemoryDesc): Int32Array | undefined {
  if (isRowMajor(md)) return undefined;
  const n = md.dims.reduce((a, b) => a * b, 1);
  const out = new Int32Array(n);
  const nd = md.dims.length;
  for (let i = 0; i < n; i++) {
    let rem = i, off = 0;
    for (let d = nd - 1; d >= 0; d--) {
      off += (rem % md.dims[d]) * md.strides[d];
      rem = Math.floor(rem / md.dims[d]);
    }
    out[i] = off;
  }
  return out;
}

export async function writeLogical(mem: AnyMemory, logical: ArrayLike<number>): Promise<void> {
  const idx = physicalIndex(mem.desc);
  const span = new Float64Array(mem.elementCount);
  if (idx) for (let i = 0; i < logical.length; i++) span[idx[i]] = logical[i];
  else span.set(logical);
  await mem.write(span);
}

export async function readLogical(mem: AnyMemory): Promise<Float64Array> {
  const span = Float64Array.from(await mem.read());
  const idx = physicalIndex(mem.desc);
  const n = mem.desc.dims.reduce((a, b) => a * b, 1);
  if (!idx) return span.slice(0, n);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = span[idx[i]];
  return out;
}

/** Sets a grouped memory's G+1 offsets from oneDNN's G cumulative ends. */
export async function writeGroupEnds(mem: AnyMemory, ends: ArrayLike<number>): Promise<void> {
  if (mem instanceof GpuMemory) await mem.writeOffsets(offsets.fromEnds(ends));
  else await offsets.fromEnds(ends, mem.offsets);
}
