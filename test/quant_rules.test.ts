/**
 * rfcs/0002 rules: every rejected attribute, post-op, primitive-descriptor and execute-time
 * combination, with its status (`invalid_arguments` vs `unimplemented`) and a distinctive fragment of
 * its message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PostOps, PrimitiveAttr, Stream, dt, grouped_gemm, matmul, memory, tag,
  type BinaryAlg, type DataType, type GluAlg, type GluLayout,
} from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { QUANT_ENGINES, RT } from './quant_helpers.js';

const G = 3, K = 16, N = 8, TM = 10;
const gM = (cols: number, t: DataType = dt.f32, groups = G): MemoryDesc => memory.desc.grouped([TM, cols], t, groups, [RT, cols]);
const wei = (t: DataType = dt.f32, n = N, k = K): MemoryDesc => memory.desc([G, k, n], t, tag.abc);
const attr = (): PrimitiveAttr => new PrimitiveAttr();

describe('attribute and post-op builders', () => {
  it.each([
    ['ARG.SRC_1', ARG.SRC_1], ['ARG.BIAS', ARG.BIAS], ['ARG.MULTIPLE_SRC + 1', ARG.MULTIPLE_SRC + 1], ['a bogus id', 999],
  ] as const)('setScales / setZeroPoints on %s is invalid', (_n, a) => {
    expectDnnlError(() => attr().setScales(a, 0), 'invalid_arguments', 'attr.setScales: arg must be ARG.SRC, ARG.WEIGHTS or ARG.DST (ARG.MULTIPLE_SRC');
    expectDnnlError(() => attr().setZeroPoints(a, 0), 'invalid_arguments', 'attr.setZeroPoints: arg must be ARG.SRC');
  });

  it.each([[-1], [1.5], [4096], [Number.NaN]])('mask %s is invalid', (m) => {
    expectDnnlError(() => attr().setScales(ARG.SRC, m), 'invalid_arguments', 'attr.setScales: mask must be an integer in [0, 4096)');
  });

  it('groups must be positive integers, at most 12', () => {
    expectDnnlError(() => attr().setScales(ARG.WEIGHTS, 7, [1, 0, 1]), 'invalid_arguments', 'attr.setScales: groups[1] must be a positive integer, got 0');
    expectDnnlError(() => attr().setZeroPoints(ARG.WEIGHTS, 7, [1, 2.5, 1]), 'invalid_arguments', 'groups[1] must be a positive integer, got 2.5');
    expectDnnlError(() => attr().setScales(ARG.WEIGHTS, 7, new Array<number>(13).fill(1)), 'invalid_arguments', 'groups must have at most 12 entries');
    expectDnnlError(() => attr().setScales(ARG.WEIGHTS, 7, 'abc' as unknown as number[]), 'invalid_arguments', 'groups must be an array');
  });

  it('unknown data types are invalid', () => {
    expectDnnlError(() => attr().setScales(ARG.SRC, 0, [], 'f64' as DataType), 'invalid_arguments', "attr.setScales: unknown data type 'f64'");
    expectDnnlError(() => attr().setZeroPoints(ARG.SRC, 0, [], 'int4' as DataType), 'invalid_arguments', "attr.setZeroPoints: unknown data type 'int4'");
  });

  it('appendBinary: algorithm and src1 descriptor', () => {
    expectDnnlError(() => new PostOps().appendBinary('binary_sub' as BinaryAlg, memory.desc([1, 1], dt.f32, tag.ab)), 'invalid_arguments', "post_ops.appendBinary: unknown algorithm 'binary_sub' (binary_mul, binary_add)");
    expectDnnlError(() => new PostOps().appendBinary('binary_mul', { dims: [1] } as unknown as MemoryDesc), 'invalid_arguments', 'post_ops.appendBinary: src1Md must be a memory descriptor');
    expectDnnlError(() => new PostOps().appendBinary('binary_mul', memory.desc([1, 1], dt.f32, tag.any)), 'invalid_arguments', 'src1Md must be a plain or grouped descriptor with a layout, got any');
  });

  it('appendGlu: algorithm, layout, first, alpha / limit', () => {
    const ok = (): PostOps => new PostOps();
    expectDnnlError(() => ok().appendGlu('glu_reglu' as GluAlg, 'halves'), 'invalid_arguments', "post_ops.appendGlu: unknown algorithm 'glu_reglu'");
    expectDnnlError(() => ok().appendGlu('glu_swiglu', 'pairs' as GluLayout), 'invalid_arguments', "post_ops.appendGlu: unknown layout 'pairs' (halves, interleaved, blocks32)");
    expectDnnlError(() => ok().appendEltwise('eltwise_relu').appendGlu('glu_swiglu', 'halves'), 'invalid_arguments', 'post_ops.appendGlu: glu must be the first post-op');
    expectDnnlError(() => ok().appendGlu('glu_swiglu', 'halves').appendGlu('glu_swiglu', 'halves'), 'invalid_arguments', 'glu must be the first post-op');
    expectDnnlError(() => ok().appendGlu('glu_geglu_erf', 'halves', 1), 'invalid_arguments', 'alpha applies to glu_swiglu and glu_swiglu_oai only, not glu_geglu_erf');
    expectDnnlError(() => ok().appendGlu('glu_swiglu', 'halves', 1, 7), 'invalid_arguments', 'limit applies to glu_swiglu_oai only, not glu_swiglu');
    expectDnnlError(() => ok().appendGlu('glu_swiglu', 'halves', Infinity), 'invalid_arguments', 'post_ops.appendGlu: alpha must be finite');
    expectDnnlError(() => ok().appendGlu('glu_swiglu_oai', 'halves', 1.702, 0), 'invalid_arguments', 'post_ops.appendGlu: limit must be finite and positive');
  });
});

describe.each(QUANT_ENGINES)('matmul pd rules [%s]', (_name, opts) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(opts);
  });
  afterAll(() => eng.release());

  /** P#1 grouped M: src [10, 16] x weights [3, 16, 8] -> dst [10, 8]. */
  const pdGM = (a: PrimitiveAttr, o: { src?: DataType; wei?: DataType; dst?: DataType; dstCols?: number; n?: number; bias?: MemoryDesc } = {}) => () => {
    const s = gM(K, o.src), w = wei(o.wei, o.n), d = gM(o.dstCols ?? o.n ?? N, o.dst);
    return o.bias ? new matmul.PrimitiveDesc(eng, s, w, o.bias, d, a) : new matmul.PrimitiveDesc(eng, s, w, d, a);
  };
  const pdDense = (a: PrimitiveAttr, o: { src?: DataType; wei?: DataType; dst?: DataType } = {}) => () =>
    new matmul.PrimitiveDesc(eng, memory.desc([5, K], o.src ?? dt.f32, tag.ab), memory.desc([K, N], o.wei ?? dt.f32, tag.ab), memory.desc([5, N], o.dst ?? dt.f32, tag.ab), a);

  describe('data types (section 3): unimplemented, naming the combination', () => {
    it.each([
      ['s8 x f32 -> f32', dt.s8, dt.f32, dt.f32], ['f32 x f32 -> s8', dt.f32, dt.f32, dt.s8], ['f8_e4m3 x f32 -> f32', dt.f8_e4m3, dt.f32, dt.f32],
      ['f32 x f8_e4m3 -> f8_e4m3', dt.f32, dt.f8_e4m3, dt.f8_e4m3],
      ['f8_e4m3 x s8 -> f32', dt.f8_e4m3, dt.s8, dt.f32], ['s8 x f4_e2m1 -> f32', dt.s8, dt.f4_e2m1, dt.f32], ['f16 x s4 -> s32', dt.f16, dt.s4, dt.s32],
      ['s4 x s4 -> s32 (4-bit src)', dt.s4, dt.s4, dt.s32], ['u8 x u8 -> f8_e4m3', dt.u8, dt.u8, dt.f8_e4m3], ['f4_e2m1 x f4_e2m1 -> s8', dt.f4_e2m1, dt.f4_e2m1, dt.s8],
      ['e8m0 x e8m0 -> f32', dt.e8m0, dt.e8m0, dt.f32], ['s32 x s8 -> s32', dt.s32, dt.s8, dt.s32],
    ] as const)('%s', (_n, s, w, d) => {
      expectDnnlError(pdGM(attr(), { src: s, wei: w, dst: d }), 'unimplemented', `matmul: data type combination src ${s} x weights ${w} -> dst ${d} is not supported`);
    });

    it('an integer bias is unimplemented', () => {
      expectDnnlError(pdGM(attr(), { src: dt.s8, wei: dt.s8, dst: dt.s32, bias: memory.desc([G, N], dt.s32, tag.ab) }), 'unimplemented', 'matmul: bias data type s32 is not supported (f32, bf16, f16)');
    });
  });

  describe('scales and zero points', () => {
    it('the MULTIPLE_* ids are for grouped_gemm', () => {
      expectDnnlError(pdGM(attr().setScales(ARG.MULTIPLE_SRC, 0)), 'invalid_arguments', 'matmul: scales and zero points take ARG.SRC, ARG.WEIGHTS or ARG.DST, got ARG.MULTIPLE_SRC + 0');
    });

    it.each(['s8', 'u8', 's32', 'f8_e5m2', 's4'] as const)('%s scales are unimplemented', (t) => {
      expectDnnlError(pdGM(attr().setScales(ARG.WEIGHTS, 0, [], t)), 'unimplemented', `matmul: scales of weights: data type ${t} is not supported (f32, bf16, f16, e8m0, f8_e4m3)`);
    });

    it.each([
      ['src f32', ARG.SRC, {}, 'src is f32'], ['weights bf16', ARG.WEIGHTS, { wei: dt.bf16 }, 'weights is bf16'], ['dst f32 of an int8 GEMM', ARG.DST, { src: dt.s8, wei: dt.s8 }, 'dst is f32'],
      ['src f8_e4m3', ARG.SRC, { src: dt.f8_e4m3, wei: dt.f8_e4m3 }, 'src is f8_e4m3'], ['weights f4_e2m1', ARG.WEIGHTS, { src: dt.f4_e2m1, wei: dt.f4_e2m1 }, 'weights is f4_e2m1'],
    ] as const)('zero points on a float tensor (%s) are invalid', (_n, a, o, frag) => {
      expectDnnlError(pdGM(attr().setZeroPoints(a, 0), o), 'invalid_arguments', `zero points apply to integer tensors only`);
      expectDnnlError(pdGM(attr().setZeroPoints(a, 0), o), 'invalid_arguments', frag);
    });

    it('zero-point data types', () => {
      expectDnnlError(pdGM(attr().setZeroPoints(ARG.SRC, 0, [], dt.f32), { src: dt.s8, wei: dt.s8 }), 'unimplemented', 'matmul: zero points of src: data type f32 is not supported (s32, s8, u8)');
      expectDnnlError(pdGM(attr().setZeroPoints(ARG.SRC, 0, [], dt.s4), { src: dt.u8, wei: dt.s8 }), 'unimplemented', 'zero points of src: data type s4 is not supported (s32, s8, u8)');
      expectDnnlError(pdGM(attr().setZeroPoints(ARG.WEIGHTS, 0, [], dt.bf16), { src: dt.u8, wei: dt.u4 }), 'unimplemented', 'zero points of weights: data type bf16 is not supported (s32, s8, u8, s4, u4)');
    });

    it('a mask naming dimensions the argument does not have is invalid', () => {
      expectDnnlError(pdGM(attr().setScales(ARG.SRC, 4)), 'invalid_arguments', "matmul: scales of src: mask 4 names dimensions beyond src's 2 (total_M, K)");
      expectDnnlError(pdGM(attr().setScales(ARG.WEIGHTS, 8)), 'invalid_arguments', "mask 8 names dimensions beyond weights's 3 (G, K, N)");
    });

    it('groups must have one entry per dimension', () => {
      expectDnnlError(pdGM(attr().setScales(ARG.WEIGHTS, 7, [1, 4])), 'invalid_arguments', 'matmul: scales of weights: groups must be empty or have 3 entries (G, K, N), got 2');
    });

    it('groups on a dimension the mask does not cover are invalid', () => {
      expectDnnlError(pdGM(attr().setScales(ARG.SRC, 1, [1, 4])), 'invalid_arguments', 'matmul: scales of src: groups[1] = 4 is on K, which mask 1 does not cover');
    });

    it('groups on rows or the expert dim are unimplemented', () => {
      expectDnnlError(pdGM(attr().setScales(ARG.SRC, 3, [2, 4])), 'unimplemented', 'matmul: scales of src: groups on total_M are not supported (only on K of src)');
      expectDnnlError(pdGM(attr().setScales(ARG.WEIGHTS, 7, [3, 4, 1])), 'unimplemented', 'groups on G are not supported (only on K, N of weights)');
      expectDnnlError(pdDense(attr().setScales(ARG.DST, 3, [1, 2])), 'unimplemented', 'matmul: scales of dst: groups on N are not supported (only on no dimension of dst)');
    });

    it('K % gK and N % gN must be 0', () => {
      expectDnnlError(pdGM(attr().setScales(ARG.SRC, 3, [1, 5])), 'invalid_arguments', 'matmul: scales of src: K = 16 is not a multiple of its group size 5');
      expectDnnlError(pdGM(attr().setScales(ARG.WEIGHTS, 7, [1, 32, 1])), 'invalid_arguments', 'matmul: scales of weights: K = 16 is not a multiple of its group size 32');
      expectDnnlError(pdGM(attr().setScales(ARG.WEIGHTS, 7, [1, 4, 3])), 'invalid_arguments', 'matmul: scales of weights: N = 8 is not a multiple of its group size 3');
      expectDnnlError(pdGM(attr().setZeroPoints(ARG.WEIGHTS, 7, [1, 6, 1]), { src: dt.s8, wei: dt.s8 }), 'invalid_arguments', 'matmul: zero points of weights: K = 16 is not a multiple of its group size 6');
      expectDnnlError(pdDense(attr().setScales(ARG.WEIGHTS, 3, [16, 3])), 'invalid_arguments', 'N = 8 is not a multiple of its group size 3');
    });

    it.each([
      ['src mask 2 (K-blocks shared by every row)', ARG.SRC, 2, [1, 4], 'matmul: scales of src: mask 2 is not supported for this src; supported: mask 0; mask 1; mask 3 with groups on K'],
      ['weights mask 4 (per column shared by experts)', ARG.WEIGHTS, 4, [], 'matmul: scales of weights: mask 4 is not supported for this weights; supported: mask 0; mask 1; mask 5; mask 7 with groups on K, N'],
      ['weights mask 3', ARG.WEIGHTS, 3, [1, 4, 1], 'mask 3 is not supported'],
      ['dst mask 1 (per row)', ARG.DST, 1, [], 'matmul: scales of dst: mask 1 is not supported for this dst; supported: mask 0'],
    ] as const)('P#1 / P#2 granularities outside the table are unimplemented: %s', (_n, a, mask, groups, frag) => {
      expectDnnlError(pdGM(attr().setScales(a, mask, [...groups])), 'unimplemented', frag);
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc([TM, K], dt.f32, tag.ab), wei(), memory.desc([TM, N], dt.f32, tag.ab), attr().setScales(a, mask, [...groups]).setGroupedOffsets(ARG.SRC, G)), 'unimplemented', 'is not supported for this');
    });

    it('a table mask with groups the row does not take is unimplemented', () => {
      expectDnnlError(pdGM(attr().setScales(ARG.WEIGHTS, 5, [1, 1, 2])), 'unimplemented', 'matmul: scales of weights: mask 5 takes no groups on N');
    });

    it('variable-K matmul takes mask 0 only', () => {
      const src = memory.desc.grouped([5, TM], dt.f32, G, [5, RT]), w = memory.desc.grouped([TM, N], dt.f32, G, [RT, N]), d = memory.desc([G, 5, N], dt.f32, tag.abc);
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, w, d, attr().setScales(ARG.SRC, 1)), 'unimplemented', 'matmul: scales of src: mask 1 is not supported for this src; supported: mask 0');
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, w, d, attr().setScales(ARG.DST, 4)), 'unimplemented', 'scales of dst: mask 4 is not supported');
    });
  });

  describe('binary post-ops', () => {
    const bin = (md: MemoryDesc, alg: BinaryAlg = 'binary_mul'): PrimitiveAttr => { const a = attr(); a.postOps.appendBinary(alg, md); return a; };

    it('src1 is f32, bf16, f16, s8, u8 or s32', () => {
      expectDnnlError(pdGM(bin(memory.desc([TM, N], dt.f8_e4m3, tag.ab))), 'unimplemented', 'matmul: binary post-op 0 src1: data type f8_e4m3 is not supported (f32, bf16, f16, s8, u8, s32)');
      expectDnnlError(pdGM(bin(memory.desc([TM, N], dt.s4, tag.ab))), 'unimplemented', 'matmul: binary post-op 0 src1: data type s4 is not supported');
      for (const t of [dt.bf16, dt.f16, dt.s8, dt.u8, dt.s32]) expect(pdGM(bin(memory.desc([TM, N], t, tag.ab)))().queryMd('binary:0')?.dataType).toBe(t);
    });

    it('src1 with runtime dims is for grouped_gemm', () => {
      expectDnnlError(pdGM(bin(memory.desc([RT, 1], dt.f32, tag.ab))), 'invalid_arguments', 'matmul: binary post-op 0 src1: dims');
    });

    it.each([[[TM, N + 1]], [[G + 1, 1]], [[TM]], [[G, 2, N]], [[1, TM, N]]])('grouped M src1 of dims %j is invalid', (dims) => {
      expectDnnlError(pdGM(bin(memory.desc(dims, dt.f32, 'abc'.slice(0, dims.length)))), 'invalid_arguments', `must be [total_M = ${TM}, ${N} or 1] (per row), [G = ${G}, ${N} or 1] (per group) or [G, 1, ${N} or 1]`);
    });

    it('a grouped src1 needs P#1, rows as the variable dim and dst\'s partition', () => {
      const p2 = attr();
      p2.postOps.appendBinary('binary_mul', gM(N));
      p2.setGroupedOffsets(ARG.SRC, G);
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc([TM, K], dt.f32, tag.ab), wei(), memory.desc([TM, N], dt.f32, tag.ab), p2), 'invalid_arguments', 'a grouped src1 needs grouped src/dst (Proposal #1)');
      expectDnnlError(pdGM(bin(memory.desc.grouped([TM, N], dt.f32, G, [TM, RT]))), 'invalid_arguments', 'a grouped src1 must be [total_M = 10, 8 or 1] grouped by rows');
      expectDnnlError(pdGM(bin(gM(N, dt.f32, 2))), 'invalid_arguments', "a grouped src1 must share dst's partition (3 groups, s32 offsets, runtime sizes)");
      expectDnnlError(pdGM(bin(memory.desc.grouped([TM, N], dt.f32, G, [3, N, 3, N, 4, N]))), 'invalid_arguments', "must share dst's partition");
    });

    it('dense / variable-K src1: same rank as dst, each dim equal or 1', () => {
      expectDnnlError(pdDense(bin(memory.desc([N], dt.f32, tag.a))), 'invalid_arguments', "matmul: binary post-op 0 src1: dims [8] must have dst's 2 dims [5,8], each equal or 1");
      expectDnnlError(pdDense(bin(memory.desc([5, 4], dt.f32, tag.ab))), 'invalid_arguments', 'each equal or 1');
      expectDnnlError(pdDense(bin(memory.desc.grouped([5, N], dt.f32, 1, [RT, N]))), 'invalid_arguments', 'must be a plain descriptor for a dense matmul');
    });
  });

  describe('GLU', () => {
    const glu = (alg: GluAlg, layout: GluLayout): PrimitiveAttr => { const a = attr(); a.postOps.appendGlu(alg, layout); return a; };

    it('N must be even, dst has N / 2 columns', () => {
      expectDnnlError(pdGM(glu('glu_swiglu', 'halves'), { n: 7, dstCols: 3 }), 'invalid_arguments', 'matmul: a glu post-op needs an even number of GEMM columns (gate + up), weights N = 7');
      expectDnnlError(pdGM(glu('glu_swiglu', 'halves'), { n: 8, dstCols: 8 }), 'invalid_arguments', 'matmul: dst dims[1] = 8 must equal weights N / 2 (glu) = 4');
      expect(pdGM(glu('glu_swiglu', 'halves'), { n: 8, dstCols: 4 })().problem.dstN).toBe(4);
    });

    it('blocks32 needs N % 64 == 0', () => {
      expectDnnlError(pdGM(glu('glu_swiglu', 'blocks32'), { n: 96, dstCols: 48 }), 'invalid_arguments', 'matmul: glu layout blocks32 needs N % 64 == 0 (alternating 32-column gate/up blocks), weights N = 96');
    });

    it('bias covers all N GEMM columns (it is added before the glu)', () => {
      expectDnnlError(pdGM(glu('glu_swiglu', 'interleaved'), { n: 8, dstCols: 4, bias: memory.desc([G, 4], dt.f32, tag.ab) }), 'invalid_arguments', 'matmul: bias dims[1] = 4 must equal 8 or be 1 (with a glu, bias covers all N GEMM columns: it is added before the glu)');
    });

    it('binary src1 after a glu has dst\'s N / 2 columns', () => {
      const a = glu('glu_swiglu', 'halves');
      a.postOps.appendBinary('binary_mul', memory.desc([TM, 8], dt.f32, tag.ab));
      expectDnnlError(pdGM(a, { n: 8, dstCols: 4 }), 'invalid_arguments', 'matmul: binary post-op 1 src1: dims [10,8] must be [total_M = 10, 4 or 1]');
    });

    it('dense and variable-K follow the same rules', () => {
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc([5, K], dt.f32, tag.ab), memory.desc([K, 6], dt.f32, tag.ab), memory.desc([5, 6], dt.f32, tag.ab), glu('glu_geglu_tanh', 'halves')), 'invalid_arguments', 'matmul: dst dims[1] = 6 must equal weights N / 2 (glu) = 3');
      const src = memory.desc.grouped([5, TM], dt.f32, G, [5, RT]), w = memory.desc.grouped([TM, 6], dt.f32, G, [RT, 6]);
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, w, memory.desc([G, 5, 6], dt.f32, tag.abc), glu('glu_swiglu', 'halves')), 'invalid_arguments', 'matmul: dst dims[2] = 6 must equal weights N / 2 (glu) = 3');
    });
  });
});

describe.each(QUANT_ENGINES)('grouped_gemm pd rules [%s]', (_name, opts) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(opts);
  });
  afterAll(() => eng.release());
  const dims = memory.desc([2], dt.s32, tag.x);
  const p3 = (a: PrimitiveAttr, o: { src?: DataType; wei?: DataType; dst?: DataType; n?: readonly [number, number]; dn?: readonly [number, number] } = {}) => () => {
    const n = o.n ?? [N, N], dn = o.dn ?? n;
    return new grouped_gemm.PrimitiveDesc(eng,
      [0, 1].map(() => memory.desc([RT, K], o.src ?? dt.f32, tag.ab)),
      [0, 1].map((i) => memory.desc([K, n[i]], o.wei ?? dt.f32, tag.ab)),
      [0, 1].map((i) => memory.desc([RT, dn[i]], o.dst ?? dt.f32, tag.ab)), dims, a);
  };

  it('scales and zero points are set once for every expert, on the MULTIPLE_* ids', () => {
    expectDnnlError(p3(attr().setScales(ARG.SRC, 0)), 'invalid_arguments', 'grouped_gemm: scales and zero points take ARG.MULTIPLE_SRC, ARG.MULTIPLE_WEIGHTS or ARG.MULTIPLE_DST (one setting for every expert), got ARG.SRC');
    expectDnnlError(p3(attr().setZeroPoints(ARG.WEIGHTS, 0), { src: dt.s8, wei: dt.s8, dst: dt.s32 }), 'invalid_arguments', 'got ARG.WEIGHTS');
  });

  it('data types follow section 3', () => {
    expectDnnlError(p3(attr(), { src: dt.u8, wei: dt.f16 }), 'unimplemented', 'grouped_gemm: data type combination src u8 x weights f16 -> dst f32 is not supported');
  });

  it('masks, groups and data types of each expert\'s values', () => {
    expectDnnlError(p3(attr().setScales(ARG.MULTIPLE_WEIGHTS, 3, [5, 1])), 'invalid_arguments', 'grouped_gemm: scales of weights (expert 0): K = 16 is not a multiple of its group size 5');
    expectDnnlError(p3(attr().setScales(ARG.MULTIPLE_SRC, 3, [2, 1])), 'unimplemented', 'grouped_gemm: scales of src (expert 0): groups on M are not supported');
    expectDnnlError(p3(attr().setScales(ARG.MULTIPLE_DST, 4)), 'invalid_arguments', "mask 4 names dimensions beyond dst's 2 (M, N)");
    expectDnnlError(p3(attr().setScales(ARG.MULTIPLE_DST, 0, [], dt.u8)), 'unimplemented', 'grouped_gemm: scales of dst (expert 0): data type u8 is not supported');
    expectDnnlError(p3(attr().setZeroPoints(ARG.MULTIPLE_SRC, 0)), 'invalid_arguments', 'grouped_gemm: zero points of src (expert 0): zero points apply to integer tensors only (s8, u8), src is f32');
  });

  it('binary src1: f32 / bf16 / f16 / s8 / u8 / s32 [1 | RUNTIME_DIM_VAL, 1 | N], shared [1, N] needs equal dst N', () => {
    const bin = (md: MemoryDesc): PrimitiveAttr => { const a = attr(); a.postOps.appendBinary('binary_add', md); return a; };
    expectDnnlError(p3(bin(memory.desc([2, 1], dt.f32, tag.ab))), 'invalid_arguments', "grouped_gemm: binary post-op 0 src1: dims [2,1] must be [1 or RUNTIME_DIM_VAL (per row), 1 or N = 8 (expert 0's dst columns)]");
    expectDnnlError(p3(bin(memory.desc([RT, N], dt.f8_e5m2, tag.ab))), 'unimplemented', 'grouped_gemm: binary post-op 0 src1: data type f8_e5m2 is not supported (f32, bf16, f16, s8, u8, s32)');
    expectDnnlError(p3(bin(memory.desc([1, 4], dt.f32, tag.ab)), { n: [4, 8] }), 'invalid_arguments', "N = 8 (expert 1's dst columns)");
  });

  it('GLU: every expert\'s N even (N % 64 for blocks32), dst N / 2', () => {
    const glu = (layout: GluLayout): PrimitiveAttr => { const a = attr(); a.postOps.appendGlu('glu_swiglu', layout); return a; };
    expectDnnlError(p3(glu('halves'), { n: [8, 7], dn: [4, 3] }), 'invalid_arguments', 'grouped_gemm: a glu post-op needs an even number of GEMM columns (gate + up), weights[1] N = 7');
    expectDnnlError(p3(glu('halves'), { n: [8, 8] }), 'invalid_arguments', 'grouped_gemm: dst[0] dims[1] = 8 must equal weights[0] N / 2 (glu) = 4');
    expectDnnlError(p3(glu('blocks32'), { n: [64, 32], dn: [32, 16] }), 'invalid_arguments', 'grouped_gemm: glu layout blocks32 needs N % 64 == 0, weights[1] N = 32');
  });
});

describe.each(QUANT_ENGINES)('execute-time rules [%s]', (_name, opts) => {
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

  /** P#1 s8 x s8 -> f32 with per-row src scales, e8m0 weights scales per expert and a routing-weight binary. */
  function fixture() {
    const a = attr().setScales(ARG.SRC, 1).setScales(ARG.WEIGHTS, 1, [], dt.e8m0);
    a.postOps.appendBinary('binary_mul', memory.desc([TM, 1], dt.f32, tag.ab));
    const pd = new matmul.PrimitiveDesc(eng, gM(K, dt.s8), wei(dt.s8), gM(N), a);
    const src = Memory.create(pd.queryMd('src')!, eng), w = Memory.create(pd.queryMd('weights')!, eng);
    src.offsets.set([0, 3, 3, 7]);
    const dst = Memory.create(pd.queryMd('dst')!, eng, [undefined, src.handles[1]]);
    const ss = Memory.create(pd.queryMd('scales:src')!, eng).write(new Array<number>(TM).fill(1));
    const sw = Memory.create(pd.queryMd('scales:weights')!, eng).write([1, 2, 4]);
    const b = Memory.create(pd.queryMd('binary:0')!, eng).write(new Array<number>(TM).fill(1));
    const args = (): Record<number, Memory | undefined> => ({ [ARG.SRC]: src, [ARG.WEIGHTS]: w, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.SRC]: ss, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sw, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: b });
    return { pd, prim: new matmul.Primitive(pd), src, w, dst, ss, sw, b, args, free: () => [src, w, dst, ss, sw, b].forEach((m) => m.free()) };
  }

  it.each([
    ['ARG.ATTR_SCALES | ARG.SRC', ARG.ATTR_SCALES | ARG.SRC],
    ['ARG.ATTR_SCALES | ARG.WEIGHTS', ARG.ATTR_SCALES | ARG.WEIGHTS],
    ['ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1', ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1],
  ] as const)('missing %s', (name, id) => {
    const f = fixture();
    const args = f.args();
    delete args[id];
    expectDnnlError(() => f.prim.execute(strm, args), 'invalid_arguments', `matmul.execute: missing argument ${name}`);
    f.free();
  });

  it('a scales memory whose descriptor differs (type, or not the documented shape)', () => {
    const f = fixture();
    const wrongType = Memory.create(memory.desc([G], dt.f32, tag.a), eng);
    expectDnnlError(() => f.prim.execute(strm, { ...f.args(), [ARG.ATTR_SCALES | ARG.WEIGHTS]: wrongType }), 'invalid_arguments', "matmul.execute: ARG.ATTR_SCALES | ARG.WEIGHTS descriptor f32::blocked:a::f0 3 does not match the primitive's e8m0::blocked:a::f0 3");
    const otherPartition = Memory.create(memory.desc.grouped([TM], dt.f32, 2, [RT]), eng);
    expectDnnlError(() => f.prim.execute(strm, { ...f.args(), [ARG.ATTR_SCALES | ARG.SRC]: otherPartition }), 'invalid_arguments', "does not match the primitive's f32::blocked:a::f0 10 (or f32::grouped:a:g3:var_dim0:offs_s32::f0 10)");
    [wrongType, otherPartition].forEach((m) => m.free());
    f.free();
  });

  it('freed, foreign-engine and non-Memory values are rejected', () => {
    const f = fixture();
    const foreign = Memory.create(f.sw.desc, other);
    expectDnnlError(() => f.prim.execute(strm, { ...f.args(), [ARG.ATTR_SCALES | ARG.WEIGHTS]: foreign }), 'invalid_arguments', 'matmul.execute: ARG.ATTR_SCALES | ARG.WEIGHTS belongs to another engine');
    expectDnnlError(() => f.prim.execute(strm, { ...f.args(), [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: {} as Memory }), 'invalid_arguments', 'ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1 must be a Memory object');
    f.ss.free();
    expectDnnlError(() => f.prim.execute(strm, f.args()), 'invalid_arguments', 'matmul.execute: ARG.ATTR_SCALES | ARG.SRC was freed');
    foreign.free();
    f.free();
  });

  it('dst must not overlap a scales or src1 memory', () => {
    const f = fixture();
    const alias = Memory.create(f.pd.queryMd('scales:src')!, eng, f.dst.handles[0]);
    expectDnnlError(() => f.prim.execute(strm, { ...f.args(), [ARG.ATTR_SCALES | ARG.SRC]: alias }), 'invalid_arguments', 'matmul.execute: ARG.DST values overlap ARG.ATTR_SCALES | ARG.SRC values');
    alias.free();
    f.free();
  });

  it('grouped per-row scales must carry src\'s offsets (checked before any row is touched)', async () => {
    const a = attr().setScales(ARG.SRC, 1);
    const pd = new matmul.PrimitiveDesc(eng, gM(K, dt.s8), wei(dt.s8), gM(N), a);
    expect(pd.queryMd('scales:src:grouped')?.isGrouped).toBe(true);
    const src = Memory.create(pd.queryMd('src')!, eng), w = Memory.create(pd.queryMd('weights')!, eng);
    src.offsets.set([0, 3, 3, 7]);
    const dst = Memory.create(pd.queryMd('dst')!, eng, [undefined, src.handles[1]]);
    dst.write(new Array<number>(TM * N).fill(5));
    const ss = Memory.create(pd.queryMd('scales:src:grouped')!, eng);
    ss.offsets.set([0, 3, 4, 7]);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: w, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.SRC]: ss });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.ATTR_SCALES | ARG.SRC offsets must equal src offsets: ARG.ATTR_SCALES | ARG.SRC offsets[2] = 4, src offsets[2] = 3');
    expect(Array.from(dst.read()).every((v) => v === 5)).toBe(true);
    [src, w, dst, ss].forEach((m) => m.free());
  });

  it('grouped_gemm: per-expert values present, and per-row memories must hold M_i rows', async () => {
    const a = attr().setScales(ARG.MULTIPLE_SRC, 1);
    a.postOps.appendBinary('binary_mul', memory.desc([RT, 1], dt.f32, tag.ab));
    const srcMds = [0, 1].map(() => memory.desc([RT, 4], dt.f32, tag.ab)), dstMds = [0, 1].map(() => memory.desc([RT, 2], dt.f32, tag.ab));
    const weiMds = [0, 1].map(() => memory.desc([4, 2], dt.f32, tag.ab));
    const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, memory.desc([2], dt.s32, tag.x), a);
    expect(pd.queryMd('scales:src', 1)?.dims).toEqual([RT]);
    expect(pd.queryMd('binary:0', 1)?.dims).toEqual([RT, 1]);
    const mems: Memory[] = [];
    const plain = (dims: number[]): Memory => { const m = Memory.create(memory.desc(dims, dt.f32, 'ab'.slice(0, dims.length)), eng); mems.push(m); return m; };
    const rt = (md: MemoryDesc, p: Memory): Memory => { const m = Memory.create(md, eng, p.handles[0]); mems.push(m); return m; };
    const args: Record<number, Memory> = {};
    for (let i = 0; i < 2; i++) {
      args[ARG.MULTIPLE_SRC + i] = rt(srcMds[i], plain([3, 4]));
      args[ARG.MULTIPLE_DST + i] = rt(dstMds[i], plain([3, 2]));
      args[ARG.MULTIPLE_WEIGHTS + i] = plain([4, 2]);
      args[ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + i)] = rt(pd.queryMd('binary:0', i)!, plain([3, 1]));
    }
    args[ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 0)] = rt(pd.queryMd('scales:src', 0)!, plain([3]));
    const dims = Memory.create(memory.desc([2], dt.s32, tag.x), eng);
    mems.push(dims);
    (dims.values as Int32Array).set([3, 3]);
    args[ARG.RUNTIME_DIMS] = dims;
    const prim = new grouped_gemm.Primitive(pd);
    expectDnnlError(() => prim.execute(strm, args), 'invalid_arguments', 'grouped_gemm.execute: missing argument ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 1)');
    // A view holding 2 rows (the heap rounds allocations up, so the capacity is stated explicitly).
    const small = Memory.create(pd.queryMd('scales:src', 1)!, eng, plain([2]).handles[0], { capacityBytes: 8 });
    mems.push(small);
    args[ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 1)] = small;
    const b1 = args[ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + 1)];
    delete args[ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + 1)];
    expectDnnlError(() => prim.execute(strm, args), 'invalid_arguments', 'grouped_gemm.execute: missing argument ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + 1)');
    args[ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + 1)] = b1;
    prim.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.RUNTIME_DIMS[1] = 3 rows do not fit ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 1) (2 rows fit)');
    mems.forEach((m) => m.free());
  });
});
