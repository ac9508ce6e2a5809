/**
 * On the cpu engine the workers run an execution while the host goes on: `Memory.read` / `write` of an
 * argument of work still in flight would copy a half-written dst or change the inputs under the
 * kernels (a write of src between execute and wait once changed the result silently). Both refuse
 * with `invalid_arguments` until the stream's `wait()`, for every primitive kind; memories the work
 * does not take stay usable; the hold ends when the work settles, failed work included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, matmul, memory, moe, offsets, reorder, tag } from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';

const E = 2, K = 256, N = 256, SIZES = [150, 106], M = 256;
const IN_FLIGHT = /Memory\.(read|write): the memory is an argument of stream work still in flight \(executed, not waited for\): await stream\.wait\(\) first$/;

let eng: Engine;
let strm: Stream;
beforeAll(async () => {
  eng = await Engine.create({ threads: 2 });
  strm = new Stream(eng);
});
afterAll(() => eng?.release());

function grouped(): { mm: matmul.Primitive; src: Memory; wei: Memory; dst: Memory; args: Record<number, Memory> } {
  const srcMd = memory.desc.grouped([M, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([M, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], dt.f32, tag.abc), dstMd));
  const src = Memory.create(srcMd, eng).write(new Float32Array(M * K).fill(1));
  const wei = Memory.create(memory.desc([E, K, N], dt.f32, tag.abc), eng).write(new Float32Array(E * K * N).fill(0.5));
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  offsets.fromSizes(SIZES, src.offsets);
  return { mm, src, wei, dst, args: { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst } };
}

describe('cpu memory while stream work that uses it is in flight', () => {
  it('matmul: read and write of its arguments refuse until wait(); an unrelated memory does not; the result is the inputs\' at execute', async () => {
    const { mm, src, wei, dst, args } = grouped();
    const other = Memory.create(memory.desc([4], dt.f32, tag.a), eng).write([1, 2, 3, 4]);
    mm.execute(strm, args);
    expect([src.inUse, wei.inUse, dst.inUse, other.inUse]).toEqual([true, true, true, false]);
    expectDnnlError(() => dst.read(), 'invalid_arguments', IN_FLIGHT);
    expectDnnlError(() => src.write(new Float32Array(M * K).fill(2)), 'invalid_arguments', IN_FLIGHT);
    expectDnnlError(() => wei.read(), 'invalid_arguments', IN_FLIGHT);
    expect(Array.from(other.read())).toEqual([1, 2, 3, 4]);
    other.write([5, 6, 7, 8]);
    await strm.wait();
    expect([src.inUse, wei.inUse, dst.inUse]).toEqual([false, false, false]);
    // Every row: K x 1 x 0.5 (the refused write of 2s never reached src).
    expect(dst.read().every((v) => v === K / 2)).toBe(true);
    src.write(new Float32Array(M * K).fill(2));
    mm.execute(strm, args);
    mm.execute(strm, args);
    await strm.wait();
    expect(dst.inUse).toBe(false);
    expect(dst.read().every((v) => v === K)).toBe(true);
    mm.destroy();
    for (const m of [src, wei, dst, other]) m.free();
  });

  it('failed work (bad runtime offsets) releases its arguments at the wait that reports it', async () => {
    const { mm, src, wei, dst, args } = grouped();
    src.offsets[1] = M + 5;
    mm.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', /offsets/);
    expect(dst.inUse).toBe(false);
    expect(() => dst.read()).not.toThrow();
    mm.destroy();
    for (const m of [src, wei, dst]) m.free();
  });

  it('grouped_gemm (:dq) holds every expert\'s src / weights / dst / scales and the runtime dims; not an unrelated memory', async () => {
    const G = 3, k = 64, n = 32, rows = [3, 0, 2];
    const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8).setScales(ARG.MULTIPLE_WEIGHTS, 2, [], dt.f32);
    const srcMd = memory.desc([RUNTIME_DIM_VAL, k], dt.f32, tag.ab), dstMd = memory.desc([RUNTIME_DIM_VAL, n], dt.f32, tag.ab);
    const weiMd = memory.desc([k, n], dt.s8, tag.ab), dimsMd = memory.desc([G], dt.s32, tag.x);
    const pd = new grouped_gemm.PrimitiveDesc(eng, Array(G).fill(srcMd), Array(G).fill(weiMd), Array(G).fill(dstMd), dimsMd, attr);
    const gg = new grouped_gemm.Primitive(pd);
    const held: Memory[] = [], dsts: Memory[] = [];
    const args: Record<number, Memory> = {};
    const add = (id: number, m: Memory): void => { args[id] = m; held.push(m); };
    for (let i = 0; i < G; i++) {
      // runtime-rows views of 4-row plain allocations (which the host writes and reads)
      const src = Memory.create(memory.desc([4, k], dt.f32, tag.ab), eng).write(new Float32Array(4 * k).fill(1));
      dsts.push(Memory.create(memory.desc([4, n], dt.f32, tag.ab), eng));
      add(ARG.MULTIPLE_SRC + i, Memory.create(srcMd, eng, src.handles[0], { capacityBytes: 4 * k * 4 }));
      add(ARG.MULTIPLE_WEIGHTS + i, Memory.create(weiMd, eng).write(new Float32Array(k * n).fill(1)));
      add(ARG.MULTIPLE_DST + i, Memory.create(dstMd, eng, dsts[i].handles[0], { capacityBytes: 4 * n * 4 }));
      held.push(src); // (freed with the others; not an argument)
      add(ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + i), Memory.create(pd.queryMd('scales:weights', i)!, eng).write(new Float32Array(n).fill(0.5)));
    }
    add(ARG.RUNTIME_DIMS, Memory.create(dimsMd, eng).write(rows));
    const other = Memory.create(memory.desc([4], dt.f32, tag.a), eng).write([1, 2, 3, 4]);
    gg.execute(strm, args);
    expect(Object.values(args).map((m) => m.inUse)).toEqual(Object.values(args).map(() => true));
    expect(other.inUse).toBe(false);
    expectDnnlError(() => args[ARG.MULTIPLE_WEIGHTS + 2].read(), 'invalid_arguments', IN_FLIGHT);
    expectDnnlError(() => args[ARG.RUNTIME_DIMS].write(rows), 'invalid_arguments', IN_FLIGHT);
    expectDnnlError(() => args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1)].write(new Float32Array(n)), 'invalid_arguments', IN_FLIGHT);
    await strm.wait();
    expect(held.some((m) => m.inUse)).toBe(false);
    // Rows of ones quantize exactly (scale 1 / 127): each dst value is k x 1 x 0.5.
    [0, 2].forEach((i) => expect(Array.from(dsts[i].read().subarray(0, rows[i] * n))).toEqual(Array(rows[i] * n).fill(k / 2)));
    gg.destroy();
    for (const m of [...held, ...dsts, other]) m.free();
  });

  it('reorder and moe.layer hold theirs too', async () => {
    const from = Memory.create(memory.desc([E, K, N], dt.f32, tag.abc), eng).write(new Float32Array(E * K * N).fill(1));
    const to = Memory.create(memory.desc([E, K, N], dt.f32, tag.acb), eng);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, from.desc, to.desc)).execute(strm, { [ARG.FROM]: from, [ARG.TO]: to });
    if (to.inUse) expectDnnlError(() => to.read(), 'invalid_arguments', IN_FLIGHT);
    await strm.wait();
    expect(to.read().every((v) => v === 1)).toBe(true);

    const T = 64, H = 128, I = 64, X = 8;
    const pd = new moe.layer.PrimitiveDesc(eng, {
      tokens: T, hidden: H, intermediate: I, experts: X, topK: 2,
      weights: { w13: memory.desc([X, H, 2 * I], dt.f32, tag.abc), w2: memory.desc([X, I, H], dt.f32, tag.abc) },
    });
    const layer = new moe.layer.Primitive(pd);
    const mk = (name: string, fill: (i: number) => number): Memory => {
      const m = Memory.create(pd.queryMd(name)!, eng);
      return m.write(Float32Array.from({ length: m.elementCount }, (_, i) => fill(i)));
    };
    const hidden = mk('hidden', (i) => Math.sin(i)), logits = mk('logits', (i) => Math.cos(i * 7));
    const w13 = mk('w13', (i) => Math.sin(i * 3) / 16), w2 = mk('w2', (i) => Math.cos(i * 5) / 16);
    const dst = Memory.create(pd.queryMd('dst')!, eng);
    layer.execute(strm, { [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: dst });
    expect(hidden.inUse && dst.inUse).toBe(true);
    expectDnnlError(() => hidden.write(new Float32Array(T * H)), 'invalid_arguments', IN_FLIGHT);
    expectDnnlError(() => dst.read(), 'invalid_arguments', IN_FLIGHT);
    await strm.wait();
    expect(hidden.inUse || dst.inUse || w13.inUse).toBe(false);
    expect(dst.read().some((v) => v !== 0)).toBe(true);
    layer.destroy();
    for (const m of [from, to, hidden, logits, w13, w2, dst]) m.free();
  });
});
