/**
 * Creation-time (primitive descriptor) and execute-time argument rules of matmul: one test per rule,
 * asserting the status and a distinctive fragment of the message. These throw synchronously.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, tag,
} from '../src/index.js';
import { ENGINE_CONFIGS, SENTINEL, expectDnnlError, setupGroupedM } from './helpers.js';

const RT = RUNTIME_DIM_VAL;
const f32 = dt.f32;
const plain = (dims: number[], t: string = 'abcdefghijkl'.slice(0, dims.length)): MemoryDesc => memory.desc(dims, f32, t);
const gM = (rows: number, cols: number, G: number): MemoryDesc => memory.desc.grouped([rows, cols], f32, G, [RT, cols]);
const gK = (rows: number, cols: number, G: number): MemoryDesc => memory.desc.grouped([rows, cols], f32, G, [rows, RT]);

describe.each(ENGINE_CONFIGS)('matmul primitive descriptor rules [%s]', (_engine, opts) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(opts);
  });
  afterAll(() => eng.release());

  const pd = (src: MemoryDesc, wei: MemoryDesc, dst: MemoryDesc, bias?: MemoryDesc, attr?: PrimitiveAttr) => () =>
    bias ? new matmul.PrimitiveDesc(eng, src, wei, bias, dst, attr) : new matmul.PrimitiveDesc(eng, src, wei, dst, attr);

  it('valid problems of each kind are accepted', () => {
    expect(pd(plain([5, 4]), plain([4, 6]), plain([5, 6]))()).toBeInstanceOf(matmul.PrimitiveDesc);
    expect(pd(gM(10, 4, 3), plain([3, 4, 6]), gM(10, 6, 3))().problem.kind).toBe('grouped_m');
    expect(pd(gK(5, 10, 3), gM(10, 7, 3), plain([3, 5, 7]))().problem.kind).toBe('grouped_k');
    expect(pd(plain([2, 5, 4]), plain([1, 4, 6]), plain([2, 5, 6]))().problem.kind).toBe('dense');
  });

  describe('common rules', () => {
    it('engine is required', () => {
      expectDnnlError(() => new matmul.PrimitiveDesc(undefined as unknown as Engine, plain([2, 2]), plain([2, 2]), plain([2, 2])), 'invalid_arguments', 'matmul: engine is required');
    });

    it('src must be a memory descriptor', () => {
      expectDnnlError(pd({} as MemoryDesc, plain([2, 2]), plain([2, 2])), 'invalid_arguments', 'matmul: src must be a memory descriptor');
    });

    it('weights must be a memory descriptor', () => {
      expectDnnlError(pd(plain([2, 2]), null as unknown as MemoryDesc, plain([2, 2])), 'invalid_arguments', 'matmul: weights must be a memory descriptor');
    });

    it('dst must be a memory descriptor', () => {
      expectDnnlError(pd(plain([2, 2]), plain([2, 2]), [2, 2] as unknown as MemoryDesc), 'invalid_arguments', 'matmul: dst must be a memory descriptor');
    });

    it('bias must be a memory descriptor', () => {
      expectDnnlError(pd(plain([2, 2]), plain([2, 2]), plain([2, 2]), { dims: [1, 2] } as unknown as MemoryDesc), 'invalid_arguments', 'matmul: bias must be a memory descriptor');
    });

    it('attr must be a PrimitiveAttr', () => {
      expectDnnlError(pd(plain([2, 2]), plain([2, 2]), plain([2, 2]), undefined, { postOps: [] } as unknown as PrimitiveAttr), 'invalid_arguments', 'matmul: attr must be a PrimitiveAttr');
    });

    it('src and dst cannot use a packed layout', () => {
      const packed = new MemoryDesc({ dims: [4, 8], dataType: f32, format: 'packed', packed: { name: 'f32:p8', byteSize: 128 } });
      expectDnnlError(pd(packed, plain([8, 2]), plain([4, 2])), 'invalid_arguments', 'matmul: src and dst cannot use a packed weights layout');
      expectDnnlError(pd(plain([2, 4]), plain([4, 8]), packed), 'invalid_arguments', 'src and dst cannot use a packed weights layout');
    });

    it('RUNTIME_DIM_VAL dims are unimplemented (use grouped descriptors)', () => {
      expectDnnlError(pd(plain([RT, 4]), plain([4, 6]), plain([RT, 6])), 'unimplemented', 'matmul: RUNTIME_DIM_VAL dims are not supported; use grouped descriptors');
    });

    it('bias must be a plain descriptor with a layout (not any, not grouped)', () => {
      expectDnnlError(pd(plain([5, 4]), plain([4, 6]), plain([5, 6]), memory.desc([1, 6], f32, tag.any)), 'invalid_arguments', 'matmul: bias must be a plain descriptor with a layout');
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), gM(10, 6, 3), gM(3, 6, 3)), 'invalid_arguments', 'bias must be a plain descriptor with a layout');
    });

    it.each([
      ['plain src, grouped dst', () => [plain([10, 4]), plain([3, 4, 6]), gM(10, 6, 3)], 'src:plain weights:plain dst:grouped(var dim0)'],
      ['grouped src, plain dst', () => [gM(10, 4, 3), plain([3, 4, 6]), plain([10, 6])], 'src:grouped(var dim0) weights:plain dst:plain'],
      ['var-M src with grouped weights', () => [gM(10, 4, 3), gM(12, 6, 3), gM(10, 6, 3)], 'src:grouped(var dim0) weights:grouped(var dim0) dst:grouped(var dim0)'],
      ['var-K src with plain weights', () => [gK(5, 10, 3), plain([10, 7]), plain([3, 5, 7])], 'src:grouped(var dim1) weights:plain dst:plain'],
      ['var-K src with var-K weights', () => [gK(5, 10, 3), gK(10, 7, 3), plain([3, 5, 7])], 'weights:grouped(var dim1)'],
      ['var-K with a grouped dst', () => [gK(5, 10, 3), gM(10, 7, 3), gM(5, 7, 3)], 'dst:grouped(var dim0)'],
    ] as const)('a layout combination that is not a matmul: %s', (_n, mds, fragment) => {
      const [s, w, d] = mds();
      const e = expectDnnlError(pd(s, w, d), 'invalid_arguments', fragment);
      expect(e.message).toContain('is not a matmul');
    });
  });

  describe('dense rules', () => {
    it('dst must have at least 2 dims', () => {
      expectDnnlError(pd(plain([4]), plain([4]), plain([4])), 'invalid_arguments', 'matmul: dst must have at least 2 dims, got 1');
    });

    it('src rank must equal dst rank', () => {
      expectDnnlError(pd(plain([1, 5, 4]), plain([4, 6]), plain([5, 6])), 'invalid_arguments', 'matmul: src has 3 dims but dst has 2');
    });

    it('weights rank must equal dst rank', () => {
      expectDnnlError(pd(plain([5, 4]), plain([1, 4, 6]), plain([5, 6])), 'invalid_arguments', 'matmul: weights have 3 dims but dst has 2');
    });

    it('weights K must equal src K', () => {
      expectDnnlError(pd(plain([5, 4]), plain([5, 6]), plain([5, 6])), 'invalid_arguments', 'matmul: weights dims[0] = 5 must equal src K = 4');
    });

    it('dst M must equal src M', () => {
      expectDnnlError(pd(plain([5, 4]), plain([4, 6]), plain([3, 6])), 'invalid_arguments', 'matmul: dst dims[0] = 3 must equal src M = 5');
    });

    it('dst N must equal weights N', () => {
      expectDnnlError(pd(plain([5, 4]), plain([4, 6]), plain([5, 7])), 'invalid_arguments', 'matmul: dst dims[1] = 7 must equal weights N = 6');
    });

    it('src batch must equal dst batch or be 1', () => {
      expectDnnlError(pd(plain([2, 5, 4]), plain([3, 4, 6]), plain([3, 5, 6])), 'invalid_arguments', "matmul: src batch dims[0] = 2 must equal dst's 3 or be 1 (broadcast)");
    });

    it('weights batch must equal dst batch or be 1', () => {
      expectDnnlError(pd(plain([3, 5, 4]), plain([2, 4, 6]), plain([3, 5, 6])), 'invalid_arguments', "matmul: weights batch dims[0] = 2 must equal dst's 3 or be 1 (broadcast)");
    });

    it('dst batch must be the broadcast of src and weights batches', () => {
      expectDnnlError(pd(plain([1, 5, 4]), plain([1, 4, 6]), plain([3, 5, 6])), 'invalid_arguments', "matmul: dst batch dims[0] = 3 must be the broadcast of src's 1 and weights' 1");
    });

    it('bias rank must equal dst rank', () => {
      expectDnnlError(pd(plain([5, 4]), plain([4, 6]), plain([5, 6]), plain([6])), 'invalid_arguments', 'matmul: bias must have 2 dims [5,6] (each may be 1), got [6]');
    });

    it('bias dims must equal dst dims or be 1', () => {
      expectDnnlError(pd(plain([5, 4]), plain([4, 6]), plain([5, 6]), plain([1, 5])), 'invalid_arguments', 'matmul: bias dims[1] = 5 must equal 6 or be 1');
    });

    it('bias with a runtime dim is rejected', () => {
      expectDnnlError(pd(plain([5, 4]), plain([4, 6]), plain([5, 6]), plain([1, RT])), 'invalid_arguments', 'matmul: bias dims[1]');
    });
  });

  describe('grouped variable-M rules', () => {
    it('grouped src must be 2D', () => {
      const src = memory.desc.grouped([10], f32, 3, [RT]);
      expectDnnlError(pd(src, plain([3, 4, 6]), gM(10, 6, 3)), 'invalid_arguments', 'matmul: grouped src must be 2D [total_M, K], got 1 dims');
    });

    it('grouped dst must be 2D', () => {
      const dst = memory.desc.grouped([10], f32, 3, [RT]);
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), dst), 'invalid_arguments', 'matmul: grouped dst must be 2D [total_M, N], got 1 dims');
    });

    it('weights must be 3D [G, K, N]', () => {
      expectDnnlError(pd(gM(10, 4, 3), plain([4, 6]), gM(10, 6, 3)), 'invalid_arguments', 'matmul: weights must be 3D [G, K, N] for a grouped src, got 2 dims');
    });

    it('src group count must equal weights G', () => {
      expectDnnlError(pd(gM(10, 4, 4), plain([3, 4, 6]), gM(10, 6, 3)), 'invalid_arguments', 'matmul: src group count 4 must equal weights dims[0] = 3');
    });

    it('dst group count must equal weights G', () => {
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), gM(10, 6, 2)), 'invalid_arguments', 'matmul: dst group count 2 must equal weights dims[0] = 3');
    });

    it('weights K must equal src K', () => {
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 5, 6]), gM(10, 6, 3)), 'invalid_arguments', 'matmul: weights dims[1] = 5 must equal src K = 4');
    });

    it('dst total rows must equal src total rows', () => {
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), gM(11, 6, 3)), 'invalid_arguments', 'matmul: dst dims[0] = 11 must equal src total rows 10');
    });

    it('dst N must equal weights N', () => {
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), gM(10, 7, 3)), 'invalid_arguments', 'matmul: dst dims[1] = 7 must equal weights N = 6');
    });

    it('src and dst per-group dims must agree', () => {
      const src = memory.desc.grouped([10, 4], f32, 2, [3, 4, 7, 4]);
      const dst = memory.desc.grouped([10, 6], f32, 2, [4, 6, 6, 6]);
      expectDnnlError(pd(src, plain([2, 4, 6]), dst), 'invalid_arguments', 'matmul: src and dst per-group dims differ');
    });

    it('bias must be [G|1, N|1]', () => {
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), gM(10, 6, 3), plain([10, 6])), 'invalid_arguments', 'matmul: bias dims[0] = 10 must equal 3 or be 1');
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), gM(10, 6, 3), plain([1, 3, 6])), 'invalid_arguments', 'matmul: bias must have 2 dims [3,6] (each may be 1), got [1,3,6]');
    });
  });

  describe('grouped variable-K rules', () => {
    it('grouped weights must be 2D', () => {
      const wei = memory.desc.grouped([10], f32, 3, [RT]);
      expectDnnlError(pd(gK(5, 10, 3), wei, plain([3, 5, 7])), 'invalid_arguments', 'matmul: grouped weights must be 2D [total_K, N], got 1 dims');
    });

    it('dst must be 3D [G, M, N]', () => {
      expectDnnlError(pd(gK(5, 10, 3), gM(10, 7, 3), plain([5, 7])), 'invalid_arguments', 'matmul: dst must be 3D [G, M, N] for variable-K groups, got 2 dims');
    });

    it('src group count must equal dst G', () => {
      expectDnnlError(pd(gK(5, 10, 4), gM(10, 7, 3), plain([3, 5, 7])), 'invalid_arguments', 'matmul: src group count 4 must equal dst dims[0] = 3');
    });

    it('weights group count must equal dst G', () => {
      expectDnnlError(pd(gK(5, 10, 3), gM(10, 7, 2), plain([3, 5, 7])), 'invalid_arguments', 'matmul: weights group count 2 must equal dst dims[0] = 3');
    });

    it('weights total K must equal src total K', () => {
      expectDnnlError(pd(gK(5, 10, 3), gM(11, 7, 3), plain([3, 5, 7])), 'invalid_arguments', 'matmul: weights dims[0] = 11 must equal src total K = 10');
    });

    it('dst M must equal src M', () => {
      expectDnnlError(pd(gK(5, 10, 3), gM(10, 7, 3), plain([3, 6, 7])), 'invalid_arguments', 'matmul: dst dims[1] = 6 must equal src M = 5');
    });

    it('dst N must equal weights N', () => {
      expectDnnlError(pd(gK(5, 10, 3), gM(10, 7, 3), plain([3, 5, 8])), 'invalid_arguments', 'matmul: dst dims[2] = 8 must equal weights N = 7');
    });

    it('src and weights per-group dims must agree', () => {
      const src = memory.desc.grouped([5, 10], f32, 2, [5, 3, 5, 7]);
      const wei = memory.desc.grouped([10, 7], f32, 2, [4, 7, 6, 7]);
      expectDnnlError(pd(src, wei, plain([2, 5, 7])), 'invalid_arguments', 'matmul: src and weights per-group dims differ');
    });

    it('bias must be [G|1, M|1, N|1]', () => {
      expectDnnlError(pd(gK(5, 10, 3), gM(10, 7, 3), plain([3, 5, 7]), plain([5, 7])), 'invalid_arguments', 'matmul: bias must have 3 dims [3,5,7] (each may be 1), got [5,7]');
      expectDnnlError(pd(gK(5, 10, 3), gM(10, 7, 3), plain([3, 5, 7]), plain([3, 2, 7])), 'invalid_arguments', 'matmul: bias dims[1] = 2 must equal 5 or be 1');
    });
  });

  describe('unimplemented', () => {
    it('data type combinations outside rfcs/0002 section 3 are unimplemented, naming the combination', () => {
      const e = expectDnnlError(pd(memory.desc([5, 4], dt.s8, tag.ab), plain([4, 6]), plain([5, 6])), 'unimplemented', 'matmul: data type combination src s8 x weights f32 -> dst f32 is not supported');
      expect(e.message).toContain('supported: f32/bf16/f16 x f32/bf16/f16 -> f32/bf16/f16');
      expectDnnlError(pd(gM(10, 4, 3), plain([3, 4, 6]), memory.desc.grouped([10, 6], dt.s32, 3, [RT, 6])), 'unimplemented', 'src f32 x weights f32 -> dst s32');
    });

    it('u8 weights with f32 src and dst are weight-only quantization (accepted)', () => {
      expect(pd(gM(10, 4, 3), memory.desc([3, 4, 6], dt.u8, tag.abc), gM(10, 6, 3))()).toBeInstanceOf(matmul.PrimitiveDesc);
    });

    it('an integer bias has no implementation', () => {
      expectDnnlError(pd(plain([5, 4]), plain([4, 6]), plain([5, 6]), memory.desc([1, 6], dt.s8, tag.ab)), 'unimplemented', 'bias data type s8');
    });

    it('an unknown packed weights layout has no implementation', () => {
      const packed = new MemoryDesc({ dims: [3, 4, 6], dataType: f32, format: 'packed', packed: { name: 'f32:bogus', byteSize: 4096 } });
      expectDnnlError(pd(gM(10, 4, 3), packed, gM(10, 6, 3)), 'unimplemented', 'matmul: no implementation for g3:10x4:3x4x6');
    });
  });
});

describe.each(ENGINE_CONFIGS)('matmul execute argument rules [%s]', (_engine, opts) => {
  let eng: Engine;
  let other: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    other = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => {
    eng.release();
    other.release();
  });

  const fixture = (bias = false) => setupGroupedM(eng, { G: 3, K: 4, N: 6, sizes: [2, 3, 4], totalM: 10, bias: bias ? [3, 6] : undefined });

  /** Asserts that a synchronous argument error left nothing queued and dst untouched. */
  async function expectNothingRan(dst: Memory, before: ArrayLike<number>): Promise<void> {
    await expect(strm.wait()).resolves.toBeUndefined();
    const after = dst.read();
    for (let i = 0; i < before.length; i++) expect(Object.is(after[i], before[i])).toBe(true);
  }

  it('stream must belong to the primitive engine', async () => {
    const f = fixture();
    const before = f.dst.read();
    expectDnnlError(() => f.prim.execute(new Stream(other), { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst }), 'invalid_arguments', 'matmul.execute: stream belongs to another engine');
    await expectNothingRan(f.dst, before);
    f.free();
  });

  it.each([
    ['ARG.SRC', ARG.SRC],
    ['ARG.WEIGHTS', ARG.WEIGHTS],
    ['ARG.DST', ARG.DST],
    ['ARG.BIAS', ARG.BIAS],
  ] as const)('missing argument %s', async (name, id) => {
    const f = fixture(true);
    const before = f.dst.read();
    const args: Record<number, Memory | undefined> = { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst, [ARG.BIAS]: f.bias };
    delete args[id];
    expectDnnlError(() => f.prim.execute(strm, args), 'invalid_arguments', `matmul.execute: missing argument ${name}`);
    await expectNothingRan(f.dst, before);
    f.free();
  });

  it('a bias, scales, zero points or binary src1 the pd was not created with are refused, not ignored (the result would be off)', async () => {
    const f = fixture();
    const before = f.dst.read();
    const args = { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst };
    const extra = Memory.create(memory.desc([3, 6], f32, tag.ab), eng);
    expectDnnlError(() => f.prim.execute(strm, { ...args, [ARG.BIAS]: extra }), 'invalid_arguments', 'matmul.execute: ARG.BIAS was given but the pd was created without a bias descriptor');
    expectDnnlError(() => f.prim.execute(strm, { ...args, [ARG.ATTR_SCALES | ARG.WEIGHTS]: extra }), 'invalid_arguments',
      'matmul.execute: ARG.ATTR_SCALES | ARG.WEIGHTS was given but the pd has no weights scales (attr.setScales(ARG.WEIGHTS, mask) at pd creation)');
    expectDnnlError(() => f.prim.execute(strm, { ...args, [ARG.ATTR_ZERO_POINTS | ARG.SRC]: extra }), 'invalid_arguments', 'ARG.ATTR_ZERO_POINTS | ARG.SRC was given but the pd has no src zero points');
    expectDnnlError(() => f.prim.execute(strm, { ...args, [ARG.ATTR_SCALES | ARG.DST]: extra }), 'invalid_arguments', 'ARG.ATTR_SCALES | ARG.DST was given but the pd has no dst scales');
    expectDnnlError(() => f.prim.execute(strm, { ...args, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: extra }), 'invalid_arguments',
      "matmul.execute: ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1 was given but the pd's post-op 0 takes no src1 (attr.postOps.appendBinary at pd creation)");
    await expectNothingRan(f.dst, before);
    extra.free();
    f.free();
  });

  it('an argument must be a Memory object', () => {
    const f = fixture();
    expectDnnlError(() => f.prim.execute(strm, { [ARG.SRC]: { handles: [1] } as unknown as Memory, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst }), 'invalid_arguments', 'matmul.execute: ARG.SRC must be a Memory object');
    f.free();
  });

  it('use after free is rejected at execute', async () => {
    const f = fixture();
    const before = f.dst.read();
    f.wei.free();
    expectDnnlError(() => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst }), 'invalid_arguments', 'matmul.execute: ARG.WEIGHTS was freed');
    await expectNothingRan(f.dst, before);
    f.free();
  });

  it('a memory object of another engine is rejected', () => {
    const f = fixture();
    const foreign = Memory.create(f.wei.desc, other);
    expectDnnlError(() => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: foreign, [ARG.DST]: f.dst }), 'invalid_arguments', 'matmul.execute: ARG.WEIGHTS belongs to another engine');
    foreign.free();
    f.free();
  });

  it('a descriptor that differs from the pd is rejected', () => {
    const f = fixture();
    const wrong = Memory.create(memory.desc([3, 4, 6], f32, tag.acb), eng);
    expectDnnlError(() => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: wrong, [ARG.DST]: f.dst }), 'invalid_arguments', "matmul.execute: ARG.WEIGHTS descriptor f32::blocked:acb::f0 3x4x6 does not match the primitive's f32::blocked:abc::f0 3x4x6");
    const dstOther = Memory.create(memory.desc.grouped([10, 6], f32, 3, [2, 6, 3, 6, 5, 6]), eng);
    expectDnnlError(() => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: dstOther }), 'invalid_arguments', 'matmul.execute: ARG.DST descriptor');
    wrong.free();
    dstOther.free();
    f.free();
  });

  it('a borrowed values buffer that was released is rejected', () => {
    const f = fixture();
    const owner = Memory.create(f.src.desc, eng);
    const src = Memory.create(f.src.desc, eng, [owner.handles[0], f.src.handles[1]]);
    owner.free();
    expectDnnlError(() => f.prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst }), 'invalid_arguments', 'matmul.execute: ARG.SRC buffer 0 is no longer a live allocation of the engine');
    src.free();
    f.free();
  });

  it('a borrowed offsets buffer that was released is rejected', () => {
    const f = fixture();
    const offsOwner = Memory.create(f.dst.desc, eng);
    const dst = Memory.create(f.dst.desc, eng, [undefined, offsOwner.handles[1]]);
    offsOwner.free();
    expectDnnlError(() => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: dst }), 'invalid_arguments', 'matmul.execute: ARG.DST buffer 1 is no longer a live allocation of the engine');
    dst.free();
    f.free();
  });

  it('dst values must not overlap src, weights or bias (no in-place matmul)', async () => {
    const f = fixture(true);
    const big = eng.alloc(4096);
    const offs = f.src.handles[1];
    const srcAt = Memory.create(f.src.desc, eng, [big, offs]);
    const weiAt = Memory.create(f.wei.desc, eng, big + 1024);
    const biasAt = Memory.create(memory.desc([3, 6], f32, tag.ab), eng, big + 2048);
    const dstOn = (at: number): Memory => Memory.create(f.dst.desc, eng, [at, offs]);
    const cases = [
      [dstOn(big + 64), { [ARG.SRC]: srcAt, [ARG.WEIGHTS]: f.wei, [ARG.BIAS]: f.bias }, 'ARG.SRC'],
      [dstOn(big + 1024 + 128), { [ARG.SRC]: f.src, [ARG.WEIGHTS]: weiAt, [ARG.BIAS]: f.bias }, 'ARG.WEIGHTS'],
      [dstOn(big + 2048 + 32), { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.BIAS]: biasAt }, 'ARG.BIAS'],
    ] as const;
    for (const [dst, args, name] of cases) {
      expectDnnlError(() => f.prim.execute(strm, { ...args, [ARG.DST]: dst }), 'invalid_arguments', `matmul.execute: ARG.DST values overlap ${name} values (in-place matmul is not supported)`);
      dst.free();
    }
    // Adjacent but not overlapping is fine.
    const touching = dstOn(big + 2048 + 72);
    expect(() => f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.BIAS]: biasAt, [ARG.DST]: touching })).not.toThrow();
    await strm.wait();
    [touching, srcAt, weiAt, biasAt].forEach((m) => m.free());
    eng.free(big);
    f.free();
  });

  it('dst may share the offsets buffer of src (only values must not overlap)', async () => {
    const f = fixture();
    const dst = Memory.create(f.dst.desc, eng, [undefined, f.src.handles[1]]);
    dst.write(new Array<number>(dst.values.length).fill(SENTINEL));
    f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: dst });
    await strm.wait();
    expect(dst.read()[0]).not.toBe(SENTINEL);
    dst.free();
    f.free();
  });
});
