/**
 * How big a grouped GEMM's grid is, no GPU needed: the schedule's tile bound (every workgroup row past
 * it would find no tile; one below it would drop a tile's rows) over every split of a few rows into
 * ranges, and gemv-splitk's lane choice for 4-bit weights on small grids.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { dt } from '../src/index.js';
import { scheduleTileBound } from '../src/kernels/wgsl/grouped_schedule.js';
import { gemvLanesFor, gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';

const DEFAULT_TUNING = { ...gpuKernelTuning };
afterEach(() => Object.assign(gpuKernelTuning, DEFAULT_TUNING));

/** Every way of putting `rows` rows into `ranges` ordered ranges (empty ones included). */
function* splits(rows: number, ranges: number): Generator<number[]> {
  if (ranges === 1) {
    yield [rows];
    return;
  }
  for (let first = 0; first <= rows; first++) for (const rest of splits(rows - first, ranges - 1)) yield [first, ...rest];
}

describe('scheduleTileBound: the most tiles any offsets can make', () => {
  it('is at least the tiles of every split of up to 7 rows into up to 5 ranges, and reached by one of them', () => {
    for (let tm = 1; tm <= 8; tm++) {
      for (let rows = 0; rows <= 7; rows++) {
        for (let ranges = 1; ranges <= 5; ranges++) {
          let most = 0;
          for (const s of splits(rows, ranges)) most = Math.max(most, s.reduce((a, n) => a + Math.ceil(n / tm), 0));
          expect(scheduleTileBound(rows, ranges, tm), `tm ${tm}, ${rows} rows, ${ranges} ranges`).toBe(most);
        }
      }
    }
  });

  it('one-row tiles: exactly the rows, however many groups (a decode step of 6 rows over 64 experts: 6)', () => {
    expect(scheduleTileBound(6, 64, 1)).toBe(6);
    expect(scheduleTileBound(6, 66, 1)).toBe(6);
    expect(scheduleTileBound(1536, 64, 1)).toBe(1536);
    // Larger tiles: a partial tile per range that holds a row, never more ranges than rows.
    expect(scheduleTileBound(6, 64, 4)).toBe(6);
    expect(scheduleTileBound(1536, 64, 32)).toBe(Math.floor((1536 + 64 * 31) / 32));
  });
});

describe('gemvLanesFor: 4-bit weights take 8 lanes on grids below gemvSmallGrid', () => {
  // MoE-B decode: gemm1 (N = 2816 with a GLU: 1408 dst columns, 64 per 16-lane tile) and gemm2 (N = 2048).
  const tilesOf = (dstN: number, glu: boolean) => (L: number, C: number): number => Math.ceil(dstN / (glu ? (L * C) / 2 : L * C));
  it('T = 1 (6 one-row tiles): 8 lanes for s4 / u4 / f4_e2m1; 16 for s8; f32 keeps 8', () => {
    expect(gemvLanesFor(dt.s4, 6, tilesOf(1408, true))).toBe(8);
    expect(gemvLanesFor(dt.u4, 6, tilesOf(2048, false))).toBe(8);
    expect(gemvLanesFor(dt.f4_e2m1, 6, tilesOf(2048, false))).toBe(8);
    expect(gemvLanesFor(dt.s8, 6, tilesOf(2048, false))).toBe(16);
    expect(gemvLanesFor(dt.f32, 6, tilesOf(2048, false))).toBe(8);
  });
  it('T = 4 (24 tiles: 528 / 384 workgroups with 16 lanes) keeps 16, as does a grid of exactly gemvSmallGrid', () => {
    expect(gemvLanesFor(dt.s4, 24, tilesOf(1408, true))).toBe(16);
    expect(gemvLanesFor(dt.s4, 24, tilesOf(2048, false))).toBe(16);
    expect(gemvLanesFor(dt.u4, 16, tilesOf(2048, false))).toBe(16);
    expect(gemvLanesFor(dt.u4, 15, tilesOf(2048, false))).toBe(8);
  });
  it('an explicit lane count or gemvSmallGrid 0 turns the rule off', () => {
    gpuKernelTuning.gemvLanes = 32;
    expect(gemvLanesFor(dt.s4, 6, tilesOf(1408, true))).toBe(32);
    gpuKernelTuning.gemvLanes = undefined;
    gpuKernelTuning.gemvSmallGrid = 0;
    expect(gemvLanesFor(dt.s4, 6, tilesOf(1408, true))).toBe(16);
  });
});
