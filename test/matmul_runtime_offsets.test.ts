/**
 * Runtime-data rules: offsets are only known at execution, so errors in them are reported by
 * `stream.wait()` (not by `execute`). Each rule asserts the status, a distinctive fragment of the
 * message, and that the destination was left untouched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, tag } from '../src/index.js';
import {
  ENGINE_CONFIGS, expectDnnlReject, readLogical, setupGroupedK, setupGroupedM, type GroupedKFixture, type GroupedMFixture,
} from './helpers.js';
import { assertClose, refGroupedK, refGroupedM } from './reference.js';

const RT = RUNTIME_DIM_VAL;

function expectUnchanged(before: ArrayLike<number>, after: ArrayLike<number>): void {
  const changed: number[] = [];
  for (let i = 0; i < before.length; i++) if (!Object.is(before[i], after[i])) changed.push(i);
  expect(changed, 'dst elements written despite the error').toEqual([]);
}

describe.each(ENGINE_CONFIGS)('matmul runtime offsets rules [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const G = 3, K = 4, N = 6, TOTAL = 10;
  const SIZES = [2, 3, 4]; // offsets [0, 2, 5, 9]: row 9 stays unrouted

  const execM = (f: GroupedMFixture, dst: Memory = f.dst): void => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: dst });
  const execK = (f: GroupedKFixture): void => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });

  /** Runs a grouped-M case with `offs` in the src offsets (and dst's, when given), expecting a rejection. */
  async function rejectM(srcOffs: number[], dstOffs: number[] | undefined, fragment: string, extra: { perGroup?: boolean; totalM?: number } = {}): Promise<DnnlError> {
    const f = setupGroupedM(eng, { G, K, N, sizes: SIZES, totalM: TOTAL, offsets: dstOffs ? 'separate' : 'shared', ...extra });
    try {
      f.src.offsets.set(srcOffs);
      if (dstOffs) f.dst.offsets.set(dstOffs);
      const before = f.dst.read();
      expect(() => execM(f)).not.toThrow(); // runtime data: nothing is known wrong at execute time
      const e = await expectDnnlReject(strm.wait(), 'invalid_arguments', fragment);
      expectUnchanged(before, f.dst.read());
      return e;
    } finally {
      f.free();
    }
  }

  describe('grouped variable M', () => {
    it('offsets[0] must be 0', async () => {
      await rejectM([1, 2, 5, 9], undefined, 'src offsets[0] must be 0, got 1');
    });

    it('offsets must be non-decreasing', async () => {
      await rejectM([0, 5, 3, 9], undefined, 'src offsets must be non-decreasing: offsets[2] = 3 < offsets[1] = 5');
    });

    it('negative offsets are decreasing', async () => {
      await rejectM([0, -1, 5, 9], undefined, 'src offsets must be non-decreasing: offsets[1] = -1 < offsets[0] = 0');
    });

    it('the last offset must not exceed total_M', async () => {
      await rejectM([0, 2, 5, 11], undefined, 'src offsets[3] = 11 exceeds the total extent 10 of dims[0]');
    });

    it('a huge last offset is caught (no out-of-bounds write)', async () => {
      await rejectM([0, 2, 5, 0x7fffffff], undefined, 'exceeds the total extent 10');
    });

    it('src and dst offsets (separate buffers) must be equal', async () => {
      await rejectM([0, 2, 5, 9], [0, 2, 4, 9], 'dst offsets must equal src offsets: dst offsets[2] = 4, src offsets[2] = 5');
    });

    it('src and dst offsets must be equal in the last entry too', async () => {
      await rejectM([0, 2, 5, 9], [0, 2, 5, 10], 'dst offsets must equal src offsets: dst offsets[3] = 10, src offsets[3] = 9');
    });

    it('host-known (per-group) sizes of src must match the offsets', async () => {
      await rejectM([0, 3, 5, 9], undefined, "src offsets give group 0 3 rows but the descriptor's per-group dims say 2", { perGroup: true, totalM: 9 });
    });

    it('host-known (per-group) sizes of dst must match the offsets, also when dst shares the src offsets buffer', async () => {
      const srcMd = memory.desc.grouped([TOTAL, K], dt.f32, G, [RT, K]);
      const dstMd = memory.desc.grouped([TOTAL, N], dt.f32, G, [2, N, 3, N, 5, N]);
      const weiMd = memory.desc([G, K, N], dt.f32, tag.abc);
      const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
      const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng);
      const shared = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      const offsOwner = Memory.create(srcMd, eng);
      const separate = Memory.create(dstMd, eng, [undefined, offsOwner.handles[1]]);
      src.write(new Array<number>(TOTAL * K).fill(1));
      wei.write(new Array<number>(G * K * N).fill(1));
      for (const dst of [shared, separate]) {
        src.offsets.set([0, 4, 5, 10]); // valid offsets, but not what dst's descriptor says (2, 3, 5)
        if (dst !== shared) dst.offsets.set([0, 4, 5, 10]);
        dst.write(new Array<number>(TOTAL * N).fill(-3));
        prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
        await expectDnnlReject(strm.wait(), 'invalid_arguments', "rows but the descriptor's per-group dims say");
        expect(dst.read().every((v) => v === -3)).toBe(true);
      }
      [src, wei, shared, separate, offsOwner].forEach((m) => m.free());
    });

    it('the stream keeps working after an error; the next wait resolves', async () => {
      const f = setupGroupedM(eng, { G, K, N, sizes: SIZES, totalM: TOTAL, offsets: 'shared' });
      f.src.offsets.set([0, 9, 5, 9]);
      execM(f);
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'non-decreasing');
      await expect(strm.wait()).resolves.toBeUndefined();
      f.src.offsets.set([0, 2, 5, 9]);
      execM(f);
      await strm.wait();
      assertClose(readLogical(f.dst).subarray(0, 9 * N), refGroupedM(f.x, f.w, SIZES, K, N));
      f.free();
    });

    it('only the first error since the last wait is reported, and later work still runs', async () => {
      const f = setupGroupedM(eng, { G, K, N, sizes: SIZES, totalM: TOTAL, offsets: 'shared' });
      // Offsets are read when the work runs (asynchronously with workers), so each execution gets its
      // own offsets buffer instead of the host rewriting one between executes.
      const withOffsets = (offs: number[]): [Memory, Memory] => {
        const src = Memory.create(f.src.desc, eng, [f.src.handles[0], undefined]);
        src.offsets.set(offs);
        return [src, Memory.create(f.dst.desc, eng, [undefined, src.handles[1]])];
      };
      const runs = [withOffsets([1, 2, 5, 9]), withOffsets([0, 2, 5, 12]), withOffsets([0, 2, 5, 9])];
      const before = runs.map(([, dst]) => dst.read());
      for (const [src, dst] of runs) f.prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: dst });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'src offsets[0] must be 0, got 1');
      await expect(strm.wait()).resolves.toBeUndefined();
      expectUnchanged(before[0], runs[0][1].read());
      expectUnchanged(before[1], runs[1][1].read());
      assertClose(readLogical(runs[2][1]).subarray(0, 9 * N), refGroupedM(f.x, f.w, SIZES, K, N));
      runs.flat().forEach((m) => m.free());
      f.free();
    });
  });

  describe('grouped variable K', () => {
    const M = 5, NK = 7;

    async function rejectK(srcOffs: number[], weiOffs: number[] | undefined, fragment: string): Promise<void> {
      const f = setupGroupedK(eng, { G, M, N: NK, sizes: SIZES, totalK: TOTAL, offsets: weiOffs ? 'separate' : 'shared' });
      try {
        f.src.offsets.set(srcOffs);
        if (weiOffs) f.wei.offsets.set(weiOffs);
        const before = f.dst.read();
        expect(() => execK(f)).not.toThrow();
        await expectDnnlReject(strm.wait(), 'invalid_arguments', fragment);
        expectUnchanged(before, f.dst.read());
      } finally {
        f.free();
      }
    }

    it('offsets[0] must be 0', async () => {
      await rejectK([2, 2, 5, 9], undefined, 'src offsets[0] must be 0, got 2');
    });

    it('offsets must be non-decreasing', async () => {
      await rejectK([0, 4, 2, 9], undefined, 'src offsets must be non-decreasing: offsets[2] = 2 < offsets[1] = 4');
    });

    it('the last offset must not exceed total_K', async () => {
      await rejectK([0, 2, 5, 11], undefined, 'src offsets[3] = 11 exceeds the total extent 10 of dims[1]');
    });

    it('src and weights offsets (separate buffers) must be equal', async () => {
      await rejectK([0, 2, 5, 9], [0, 3, 5, 9], 'weights offsets must equal src offsets: weights offsets[1] = 3, src offsets[1] = 2');
    });

    it('host-known (per-group) sizes must match the offsets', async () => {
      const f = setupGroupedK(eng, { G, M, N: NK, sizes: SIZES, totalK: 9, perGroup: true, offsets: 'shared' });
      f.src.offsets.set([0, 2, 6, 9]);
      const before = f.dst.read();
      execK(f);
      await expectDnnlReject(strm.wait(), 'invalid_arguments', "offsets give group 1 4 rows but the descriptor's per-group dims say 3");
      expectUnchanged(before, f.dst.read());
      f.free();
    });

    it('valid offsets after an error compute correctly', async () => {
      const f = setupGroupedK(eng, { G, M, N: NK, sizes: SIZES, totalK: TOTAL, offsets: 'shared' });
      f.src.offsets.set([0, 2, 1, 9]);
      execK(f);
      await expect(strm.wait()).rejects.toBeInstanceOf(DnnlError);
      f.src.offsets.set([0, 2, 5, 9]);
      execK(f);
      await strm.wait();
      assertClose(readLogical(f.dst), refGroupedK(f.x, f.w, SIZES, M, NK));
      f.free();
    });
  });
});
