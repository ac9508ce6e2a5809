/**
 * What users do today without grouped GEMM: one plain matmul per active expert on sub-views of the
 * contiguous buffers, with a primitive per distinct row count (a user-side primitive cache).
 */
import { ARG, Memory, dt, matmul, memory, tag } from 'groupdnn';
import { demo, isMain, type ProposalFactory } from './proposals_harness.js';

export const createBaseline: ProposalFactory = (eng, strm, { E, K, N, capacity }, weights) => {
  // user-code-begin
  const src = Memory.create(memory.desc([capacity, K], dt.f32, tag.ab), eng);
  const dst = Memory.create(memory.desc([capacity, N], dt.f32, tag.ab), eng);
  const weiMd = memory.desc([K, N], dt.f32, tag.ab);
  const wei = Array.from({ length: E }, (_, i) => Memory.create(weiMd, eng, weights.handles[0] + i * K * N * 4));
  const cache = new Map<number, matmul.Primitive>(); // rows -> primitive
  const step = (sizes: readonly number[]): void => {
    let row = 0;
    sizes.forEach((m, i) => {
      if (m === 0) return;
      let mm = cache.get(m);
      if (!mm) {
        const pd = new matmul.PrimitiveDesc(eng, memory.desc([m, K], dt.f32, tag.ab), weiMd, memory.desc([m, N], dt.f32, tag.ab));
        cache.set(m, (mm = new matmul.Primitive(pd)));
      }
      const s = Memory.create(mm.pd.queryMd('src')!, eng, src.handles[0] + row * K * 4);
      const d = Memory.create(mm.pd.queryMd('dst')!, eng, dst.handles[0] + row * N * 4);
      mm.execute(strm, { [ARG.SRC]: s, [ARG.WEIGHTS]: wei[i], [ARG.DST]: d });
      row += m;
    });
  };
  // user-code-end
  return { srcValues: src.values as Float32Array, dstValues: dst.values as Float32Array, step };
};

if (isMain(import.meta.url)) await demo('baseline per-expert loop', createBaseline);
