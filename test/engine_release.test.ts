/**
 * After `eng.release()` nothing may use the engine: creating a pd (every primitive kind), a primitive
 * or a stream, and executing, throw `engine: used after release()` (they used to run on the heap of a
 * released engine).
 */
import { describe, it } from 'vitest';
import {
  ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, dynamic_quant, glu_backward, grouped_gemm, grouped_gemm_backward_data,
  grouped_gemm_backward_weights, matmul, matmul_backward_data, matmul_backward_weights, memory, moe, offsets, reorder, tag,
} from '../src/index.js';
import { expectDnnlError } from './helpers.js';

const RT = RUNTIME_DIM_VAL;
const G = 2, K = 8, N = 4, R = 6, T = 3, E = 4;
const rows = (cols: number): ReturnType<typeof memory.desc> => memory.desc.grouped([R, cols], dt.f32, G, [RT, cols]);
const plain = (dims: number[]): ReturnType<typeof memory.desc> => memory.desc(dims, dt.f32, dims.length === 2 ? tag.ab : tag.abc);

interface Pd { readonly engine: Engine }
interface Prim { destroy(): void }

/** One factory per pd kind (and its primitive), each valid on a live engine. */
function kinds(eng: Engine): [string, () => Pd, (pd: never) => Prim][] {
  const fwdMatmul = (): matmul.PrimitiveDesc => new matmul.PrimitiveDesc(eng, rows(K), plain([G, K, N]), rows(N));
  const routingPd = (): moe.routing.PrimitiveDesc => new moe.routing.PrimitiveDesc(eng, plain([T, E]), { topK: 2 });
  const combinePd = (): moe.combine.PrimitiveDesc => new moe.combine.PrimitiveDesc(eng, { tokens: T, topK: 2, src: plain([T * 2, N]), dst: plain([T, N]) });
  const layerCfg = { tokens: T, hidden: K, intermediate: N, experts: E, topK: 2 };
  const trainingPd = (): moe.layer.PrimitiveDesc => new moe.layer.PrimitiveDesc(eng, { ...layerCfg, propKind: 'forward_training' });
  const p3 = (cols: number[]): ReturnType<typeof memory.desc>[] => cols.map((c) => memory.desc([RT, c], dt.f32, tag.ab));
  const rd = (): ReturnType<typeof memory.desc> => memory.desc([G], dt.s32, tag.x);
  return [
    ['matmul', fwdMatmul, (pd: matmul.PrimitiveDesc) => new matmul.Primitive(pd)],
    ['reorder', () => new reorder.PrimitiveDesc(eng, plain([K, N]), memory.desc([K, N], dt.f32, tag.ba)), (pd: reorder.PrimitiveDesc) => new reorder.Primitive(pd)],
    ['grouped_gemm', () => new grouped_gemm.PrimitiveDesc(eng, p3([K, K]), [plain([K, N]), plain([K, N])], p3([N, N]), rd()), (pd: grouped_gemm.PrimitiveDesc) => new grouped_gemm.Primitive(pd)],
    ['dynamic_quant', () => new dynamic_quant.PrimitiveDesc(eng, plain([T, K]), memory.desc([T, K], dt.s8, tag.ab)), (pd: dynamic_quant.PrimitiveDesc) => new dynamic_quant.Primitive(pd)],
    ['moe.routing', routingPd, (pd: moe.routing.PrimitiveDesc) => new moe.routing.Primitive(pd)],
    ['moe.routing.backward', () => new moe.routing.BackwardPrimitiveDesc(eng, routingPd()), (pd: moe.routing.BackwardPrimitiveDesc) => new moe.routing.BackwardPrimitive(pd)],
    ['moe.dispatch', () => new moe.dispatch.PrimitiveDesc(eng, { tokens: T, topK: 2, experts: E }), (pd: moe.dispatch.PrimitiveDesc) => new moe.dispatch.Primitive(pd)],
    ['moe.combine', combinePd, (pd: moe.combine.PrimitiveDesc) => new moe.combine.Primitive(pd)],
    ['moe.combine.backward', () => new moe.combine.BackwardPrimitiveDesc(eng, combinePd()), (pd: moe.combine.BackwardPrimitiveDesc) => new moe.combine.BackwardPrimitive(pd)],
    ['moe.activation', () => new moe.activation.PrimitiveDesc(eng, plain([R, 2 * N]), plain([R, N]), { alg: 'glu_swiglu' }), (pd: moe.activation.PrimitiveDesc) => new moe.activation.Primitive(pd)],
    ['moe.layer', () => new moe.layer.PrimitiveDesc(eng, layerCfg), (pd: moe.layer.PrimitiveDesc) => new moe.layer.Primitive(pd)],
    ['moe.layer.backward', () => new moe.layer.BackwardPrimitiveDesc(eng, trainingPd()), (pd: moe.layer.BackwardPrimitiveDesc) => new moe.layer.BackwardPrimitive(pd, new moe.layer.Primitive(pd.hint))],
    ['matmul_backward_data', () => new matmul_backward_data.PrimitiveDesc(eng, rows(K), plain([G, K, N]), rows(N)), (pd: matmul_backward_data.PrimitiveDesc) => new matmul_backward_data.Primitive(pd)],
    ['matmul_backward_weights', () => new matmul_backward_weights.PrimitiveDesc(eng, rows(K), plain([G, K, N]), rows(N)), (pd: matmul_backward_weights.PrimitiveDesc) => new matmul_backward_weights.Primitive(pd)],
    ['grouped_gemm_backward_weights', () => new grouped_gemm_backward_weights.PrimitiveDesc(eng, p3([K, K]), [plain([K, N]), plain([K, N])], p3([N, N]), rd()), (pd: grouped_gemm_backward_weights.PrimitiveDesc) => new grouped_gemm_backward_weights.Primitive(pd)],
    ['grouped_gemm_backward_data', () => new grouped_gemm_backward_data.PrimitiveDesc(eng, p3([K, K]), [plain([K, N]), plain([K, N])], p3([N, N]), rd()), (pd: grouped_gemm_backward_data.PrimitiveDesc) => new grouped_gemm_backward_data.Primitive(pd)],
    ['glu_backward', () => new glu_backward.PrimitiveDesc(eng, plain([R, 2 * N]), plain([R, N]), plain([R, 2 * N]), { alg: 'glu_swiglu', layout: 'halves' }), (pd: glu_backward.PrimitiveDesc) => new glu_backward.Primitive(pd)],
  ] as [string, () => Pd, (pd: never) => Prim][];
}

describe('engine: used after release()', () => {
  for (const opts of [{ threads: 1 }, { threads: 2, kernels: 'simd128' as const }, { threads: 1, kernels: 'none' as const }]) {
    it(`every pd kind, every primitive, a stream and execute are refused (${JSON.stringify(opts)})`, async () => {
      const eng = await Engine.create(opts);
      const list = kinds(eng);
      // Everything is valid while the engine lives: the refusals below are the release's.
      const pds = list.map(([, makePd]) => makePd());
      const prims = list.map(([, , makePrim], i) => makePrim(pds[i] as never));
      const strm = new Stream(eng);
      const srcMd = rows(K), dstMd = rows(N), weiMd = plain([G, K, N]);
      const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      offsets.fromSizes([4, 2], src.offsets);
      const mm = prims[0] as matmul.Primitive;
      mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      await strm.wait();
      const from = Memory.create(plain([K, N]), eng), to = Memory.create(memory.desc([K, N], dt.f32, tag.ba), eng);
      await eng.idle();
      eng.release();

      const refused = (what: string, fn: () => unknown): void => {
        try {
          expectDnnlError(fn, 'invalid_arguments', 'engine: used after release()');
        } catch (e) {
          throw new Error(`${what}: ${(e as Error).message}`);
        }
      };
      for (const [name, makePd] of list) refused(`${name} pd`, makePd);
      list.forEach(([name, , makePrim], i) => refused(`${name} primitive`, () => makePrim(pds[i] as never)));
      expectDnnlError(() => new Stream(eng), 'invalid_arguments', 'engine: used after release()');
      expectDnnlError(() => mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst }), 'invalid_arguments', 'engine: used after release()');
      expectDnnlError(() => (prims[1] as reorder.Primitive).execute(strm, { [ARG.FROM]: from, [ARG.TO]: to }), 'invalid_arguments', 'engine: used after release()');
      expectDnnlError(() => eng.alloc(64), 'invalid_arguments', 'engine: used after release()');
    });
  }
});
