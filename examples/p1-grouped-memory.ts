/** RFC Proposal #1: a grouped memory descriptor (values + offsets) consumed by the unchanged matmul. */
import { ARG, Memory, RUNTIME_DIM_VAL, dt, matmul, memory, offsets } from 'groupdnn';
import { demo, isMain, type ProposalFactory } from './proposals_harness.js';

export const createP1: ProposalFactory = (eng, strm, { E, K, N, capacity }, weights) => {
  // user-code-begin
  const srcMd = memory.desc.grouped([capacity, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([capacity, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weights.desc, dstMd));
  const src = Memory.create(srcMd, eng);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]); // one offsets buffer for both
  const step = (sizes: readonly number[]): void => {
    offsets.fromSizes(sizes, src.offsets); // the routing kernel would write these in place
    mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: weights, [ARG.DST]: dst });
  };
  // user-code-end
  return { srcValues: src.values as Float32Array, dstValues: dst.values as Float32Array, step };
};

if (isMain(import.meta.url)) await demo('p1 grouped memory', createP1);
