/** RFC Proposal #2: plain 2D src/dst, offsets as a matmul attribute passed at execution. */
import { ARG, Memory, PrimitiveAttr, dt, matmul, memory, offsets, tag } from 'groupdnn';
import { demo, isMain, type ProposalFactory } from './proposals_harness.js';

export const createP2: ProposalFactory = (eng, strm, { E, K, N, capacity }, weights) => {
  // user-code-begin
  const attr = new PrimitiveAttr().setGroupedOffsets(ARG.SRC, E, dt.s32);
  const srcMd = memory.desc([capacity, K], dt.f32, tag.ab);
  const dstMd = memory.desc([capacity, N], dt.f32, tag.ab);
  const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weights.desc, dstMd, attr));
  const src = Memory.create(srcMd, eng);
  const dst = Memory.create(dstMd, eng);
  const offs = Memory.create(memory.desc([E + 1], dt.s32, tag.x), eng);
  const step = (sizes: readonly number[]): void => {
    offsets.fromSizes(sizes, offs.values as Int32Array);
    mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: weights, [ARG.DST]: dst, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs });
  };
  // user-code-end
  return { srcValues: src.values as Float32Array, dstValues: dst.values as Float32Array, step };
};

if (isMain(import.meta.url)) await demo('p2 offsets attribute', createP2);
