/**
 * One memory object given as an output and as another argument is an overlap like two objects over one
 * buffer (the no-overlap check used to skip an argument equal to the output by object, so passing the
 * same object twice got through; the reference backward then returned wrong values): matmul_backward_data
 * (P#2), grouped_gemm_backward_data (P#3, runtime rows: the same start), moe.combine.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm_backward_data, matmul_backward_data, memory, moe, tag,
} from '../src/index.js';
import { expectDnnlError } from './helpers.js';

let eng: Engine;
let strm: Stream;
beforeAll(async () => {
  eng = await Engine.create({ threads: 1, kernels: 'none' });
  strm = new Stream(eng);
});
afterAll(() => eng?.release());

describe('an output given again as an input is an overlap', () => {
  it('matmul_backward_data (P#2): ARG.DIFF_SRC === ARG.DIFF_DST', () => {
    const md = memory.desc([2, 3], dt.f32, tag.ab), wm = memory.desc([1, 3, 3], dt.f32, tag.abc);
    const pd = new matmul_backward_data.PrimitiveDesc(eng, md, wm, md, undefined, new PrimitiveAttr().setGroupedOffsets(ARG.SRC, 1));
    const a = Memory.create(md, eng).write([1, 0, 0, 0, 1, 0]);
    const args = { [ARG.DIFF_DST]: a, [ARG.WEIGHTS]: Memory.create(wm, eng), [ARG.DIFF_SRC]: a, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: Memory.create(memory.desc([2], dt.s32, tag.a), eng).write([0, 2]) };
    expectDnnlError(() => new matmul_backward_data.Primitive(pd).execute(strm, args), 'invalid_arguments', 'ARG.DIFF_SRC values overlap ARG.DIFF_DST values');
  });

  it('grouped_gemm_backward_data (P#3): ARG.MULTIPLE_SRC + 0 === ARG.MULTIPLE_DST + 0, and two views from one start', () => {
    const md = memory.desc([RUNTIME_DIM_VAL, 3], dt.f32, tag.ab), wmd = memory.desc([3, 3], dt.f32, tag.ab);
    const pd = new grouped_gemm_backward_data.PrimitiveDesc(eng, [md], [wmd], [md], memory.desc([1], dt.s32, tag.a));
    const buf = Memory.create(memory.desc([2, 3], dt.f32, tag.ab), eng);
    const a = Memory.create(md, eng, buf.handles[0]), b = Memory.create(md, eng, buf.handles[0]);
    const base = { [ARG.MULTIPLE_WEIGHTS]: Memory.create(wmd, eng), [ARG.RUNTIME_DIMS]: Memory.create(memory.desc([1], dt.s32, tag.a), eng).write([2]) };
    const prim = new grouped_gemm_backward_data.Primitive(pd);
    for (const other of [a, b]) {
      expectDnnlError(() => prim.execute(strm, { ...base, [ARG.MULTIPLE_DST]: a, [ARG.MULTIPLE_SRC]: other }), 'invalid_arguments', 'ARG.MULTIPLE_SRC + 0 values overlap ARG.MULTIPLE_DST + 0 values');
    }
  });

  it('moe.combine (k = 1): ARG.DST === ARG.SRC', () => {
    const pd = new moe.combine.PrimitiveDesc(eng, { tokens: 3, topK: 1, src: memory.desc([3, 4], dt.f32, tag.ab), dst: memory.desc([3, 4], dt.f32, tag.ab) });
    const x = Memory.create(memory.desc([3, 4], dt.f32, tag.ab), eng);
    const args: Record<number, Memory> = { [ARG.SRC]: x, [ARG.DST]: x };
    for (const [name, id] of [['topk_weights', ARG.MOE_TOPK_WEIGHTS], ['row_of', ARG.MOE_ROW_OF]] as const) {
      const q = pd.queryMd(name);
      if (q) args[id] = Memory.create(q, eng);
    }
    expectDnnlError(() => new moe.combine.Primitive(pd).execute(strm, args), 'invalid_arguments', 'ARG.DST values overlap ARG.SRC values');
  });
});
