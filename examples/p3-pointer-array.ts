/**
 * RFC Proposal #3: a grouped_gemm primitive over per-expert memory objects with runtime M. The
 * framework's data is contiguous, so the per-expert views (pointer arrays) are rebuilt every step,
 * as the RFC's "Frameworks Compatibility" section warns.
 */
import { ARG, Memory, RUNTIME_DIM_VAL, dt, grouped_gemm, memory, offsets, tag } from 'groupdnn';
import { demo, isMain, type ProposalFactory } from './proposals_harness.js';

export const createP3: ProposalFactory = (eng, strm, { E, K, N, capacity }, weights) => {
  // user-code-begin
  const srcMds = Array.from({ length: E }, () => memory.desc([RUNTIME_DIM_VAL, K], dt.f32, tag.ab));
  const weiMds = Array.from({ length: E }, () => memory.desc([K, N], dt.f32, tag.ab));
  const dstMds = Array.from({ length: E }, () => memory.desc([RUNTIME_DIM_VAL, N], dt.f32, tag.ab));
  const dimsMd = memory.desc([E], dt.s32, tag.x);
  const gemm = new grouped_gemm.Primitive(new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, dimsMd));
  const src = Memory.create(memory.desc([capacity, K], dt.f32, tag.ab), eng);
  const dst = Memory.create(memory.desc([capacity, N], dt.f32, tag.ab), eng);
  const wei = weiMds.map((md, i) => Memory.create(md, eng, weights.handles[0] + i * K * N * 4));
  const dims = Memory.create(dimsMd, eng);
  const step = (sizes: readonly number[]): void => {
    const offs = offsets.fromSizes(sizes);
    const srcViews = grouped_gemm.expertViews(src, offs); // pointers move with the routing
    const dstViews = grouped_gemm.expertViews(dst, offs);
    (dims.values as Int32Array).set(sizes);
    const args: Record<number, Memory> = { [ARG.RUNTIME_DIMS]: dims };
    for (let i = 0; i < E; i++) {
      args[ARG.MULTIPLE_SRC + i] = srcViews[i];
      args[ARG.MULTIPLE_WEIGHTS + i] = wei[i];
      args[ARG.MULTIPLE_DST + i] = dstViews[i];
    }
    gemm.execute(strm, args);
  };
  // user-code-end
  return { srcValues: src.values as Float32Array, dstValues: dst.values as Float32Array, step };
};

if (isMain(import.meta.url)) await demo('p3 pointer array', createP3);
