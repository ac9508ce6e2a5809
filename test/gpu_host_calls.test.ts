/**
 * The host side of a gpu execution (issues 20 / 21, decode latency): what one MoE layer execution asks
 * of Dawn once its executors exist (one compute pass for all stages, no clearBuffer, one error scope,
 * nothing created or written), and that the state the engine no longer clears per execution (status
 * slots, the routing flag, the dispatch scratch) is still clean after a runtime error: the next good
 * execution of the same primitive raises nothing and gives a clean run's bits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, GpuEngine, GpuMemory, Memory, Stream, dt, memory, moe, tag } from '../src/index.js';
import { formOf } from '../src/primitives/moe/dispatch/webgpu_dispatch.js';
import { gpuEngine } from './gpu_helpers.js';
import { expectDnnlReject } from './helpers.js';
import { randomIds, refPlace } from './moe_dispatch_cases.js';
import { mulberry32, randomF32 } from './workloads.js';

let gpu: GpuEngine;
beforeAll(async () => {
  gpu = await gpuEngine();
});
afterAll(() => {
  gpu?.release();
});

const T = 1, E = 8, k = 2, K = 72, I = 40;

interface Layer {
  readonly layer: moe.layer.Primitive<GpuEngine>;
  readonly args: Record<number, GpuMemory>;
  readonly logits: GpuMemory;
  readonly out: GpuMemory;
}

function decodeLayer(seed: number): Layer {
  const pd = new moe.layer.PrimitiveDesc(gpu, {
    tokens: T, hidden: K, intermediate: I, experts: E, topK: k, routing: { renormalize: true },
    weights: { w13: memory.desc([E, K, 2 * I], dt.f32, tag.abc), w2: memory.desc([E, I, K], dt.f32, tag.abc) },
  });
  const layer = new moe.layer.Primitive(pd);
  const r = mulberry32(seed);
  const m = (dims: number[], scale: number): GpuMemory =>
    Memory.create(memory.desc(dims, dt.f32, dims.length === 2 ? tag.ab : tag.abc), gpu).write(randomF32(r, dims.reduce((a, b) => a * b, 1)).map((v) => v * scale));
  const logits = m([T, E], 2);
  const out = Memory.create(pd.queryMd('dst')!, gpu);
  const args = { [ARG.SRC]: m([T, K], 1), [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: m([E, K, 2 * I], 0.1), [ARG.WEIGHTS_1]: m([E, I, K], 0.1), [ARG.DST]: out };
  return { layer, args, logits, out };
}

type Counts = Record<string, number>;

/** Counts the calls of the named methods of each object's prototype while `fn` runs. */
async function counted(targets: readonly [object, readonly string[]][], fn: () => Promise<void>): Promise<Counts> {
  const counts: Counts = {};
  const undo: (() => void)[] = [];
  for (const [obj, names] of targets) {
    const proto = Object.getPrototypeOf(obj) as Record<string, (...a: unknown[]) => unknown>;
    for (const name of names) {
      const f = proto[name];
      counts[name] = 0;
      proto[name] = function (this: unknown, ...a: unknown[]): unknown {
        counts[name]++;
        return f.apply(this, a);
      };
      undo.push(() => { proto[name] = f; });
    }
  }
  try {
    await fn();
  } finally {
    for (const u of undo) u();
  }
  return counts;
}

describe('gpu engine host calls per execution', () => {
  it('a decode layer executed again records one compute pass of 4 dispatches for its five stages (route + dispatch fused), no clearBuffer, one error scope, nothing created or written; the same bits', async () => {
    const L = decodeLayer(1);
    // Both GEMMs find their tiles themselves: no grouped-schedule dispatch in front of them.
    expect(L.layer.pd.implInfo).toMatch(/gemv-splitk-r\d-kg1(-vec)?\+inline-schedule.*gemv-splitk-r\d-kg1(-vec)?\+inline-schedule/);
    expect(L.layer.pd.implInfo).not.toMatch(/grouped-schedule/);
    expect(L.layer.fused.map((f) => f.implInfo)).toEqual(['webgpu:moe-route+dispatch-one']);
    const strm = new Stream(gpu);
    for (let r = 0; r < 2; r++) {
      L.layer.execute(strm, L.args);
      await strm.wait();
    }
    const first = await L.out.read();
    const dev = gpu.device;
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.end();
    enc.finish();
    const runs = 3;
    const c = await counted([
      [dev, ['createBindGroup', 'createBuffer', 'pushErrorScope', 'popErrorScope']],
      [dev.queue, ['submit', 'writeBuffer']],
      [enc, ['beginComputePass', 'clearBuffer', 'copyBufferToBuffer']],
      [pass, ['setPipeline', 'setBindGroup', 'dispatchWorkgroups', 'dispatchWorkgroupsIndirect', 'end']],
    ], async () => {
      for (let r = 0; r < runs; r++) {
        L.layer.execute(strm, L.args);
        await strm.wait();
      }
    });
    const per = Object.fromEntries(Object.entries(c).map(([name, n]) => [name, n / runs]));
    // routing + dispatch: one (one workgroup checks the logits, routes and places at decode sizes); gemm1 and gemm2: one gemv each (the
    // schedule inside it, K not split); combine: one (its row_of check fused at decode sizes).
    expect(per).toEqual({
      createBindGroup: 0, createBuffer: 0, pushErrorScope: 1, popErrorScope: 1, submit: 1, writeBuffer: 0,
      // The one copy is the status slots' read-back.
      beginComputePass: 1, clearBuffer: 0, copyBufferToBuffer: 1, end: 1,
      dispatchWorkgroups: 4, dispatchWorkgroupsIndirect: 0, setPipeline: 4, setBindGroup: 4,
    });
    expect(await L.out.read()).toEqual(first);
    L.layer.destroy();
  });

  it('while profiling, each stage still gets a compute pass of its own (the profiler times them apart), also when profiling starts inside a batch', async () => {
    if (!gpu.caps.timestampQuery) {
      expect(() => gpu.setProfiling(true)).toThrow(/timestamp-query/);
      return;
    }
    const L = decodeLayer(2);
    const strm = new Stream(gpu);
    // Turned on while the batch's shared pass is open (an execution recorded, not submitted): it ends first.
    L.layer.execute(strm, L.args);
    gpu.setProfiling(true);
    try {
      L.layer.execute(strm, L.args);
      await strm.wait();
      expect(gpu.takeProfile().map((x) => x.label)).toEqual(['moe.routing+dispatch', 'matmul', 'matmul', 'moe.combine']);
    } finally {
      gpu.setProfiling(false);
    }
    L.layer.destroy();
  });

  it('a NaN logit, then good logits on the same layer: the error once, then no stale error and a clean run\'s bits (routing flag and status slots cleared after the error)', async () => {
    const L = decodeLayer(3), clean = decodeLayer(3);
    const strm = new Stream(gpu);
    clean.layer.execute(strm, clean.args);
    await strm.wait();
    const want = await clean.out.read();
    const good = await L.logits.read();
    const bad = Float32Array.from(good);
    bad[3] = NaN;
    L.logits.write(bad);
    L.layer.execute(strm, L.args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'NaN');
    L.logits.write(good);
    for (let r = 0; r < 2; r++) {
      L.layer.execute(strm, L.args);
      await strm.wait();
      expect(await L.out.read()).toEqual(want);
    }
    // Bad then good in one submit: the error is raised, and the next wait is clean again.
    L.logits.write(bad);
    L.layer.execute(strm, L.args);
    L.logits.write(good);
    L.layer.execute(strm, L.args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'NaN');
    expect(await L.out.read()).toEqual(want);
    L.layer.execute(strm, L.args);
    await strm.wait();
    expect(await L.out.read()).toEqual(want);
    clean.layer.destroy();
    L.layer.destroy();
  });

  it.each([[300, 5, 'grid'], [100, 5, 'one'], [300, 600, 'two'], [300, 1100, 'four']] as const)('one dispatch primitive, T = %i, E = %i (form %s): bad ids, then good ids, then twice in one submit: the placement every time (nothing left in the scratch)', async (Tn, En, form) => {
    const kn = 2;
    const pd = new moe.dispatch.PrimitiveDesc(gpu, { tokens: Tn, topK: kn, experts: En });
    expect(formOf(pd.problem)).toBe(form);
    const prim = new moe.dispatch.Primitive(pd);
    const q = (what: Parameters<moe.dispatch.PrimitiveDesc['queryMd']>[0]): GpuMemory => Memory.create(pd.queryMd(what)!, gpu);
    const ids = q('topk_ids'), dst = q('dst'), tokenIndex = q('token_index'), tokenKs = q('token_ks'), rowOf = q('row_of');
    const args = { [ARG.MOE_TOPK_IDS]: ids, [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: tokenIndex, [ARG.MOE_TOKEN_KS]: tokenKs, [ARG.MOE_ROW_OF]: rowOf };
    const strm = new Stream(gpu);
    const check = async (v: Int32Array): Promise<void> => {
      const ref = refPlace(v, Tn, kn, En);
      const rowOfWant = new Array<number>(Tn * kn).fill(-1), tiWant = new Array<number>(Tn * kn).fill(-1), ksWant = new Array<number>(Tn * kn).fill(-1);
      ref.rows.forEach((rows, g) => rows.forEach(([t, s], j) => {
        const pos = ref.offs[g] + j;
        rowOfWant[t * kn + s] = pos;
        tiWant[pos] = t;
        ksWant[pos] = s;
      }));
      expect(Array.from(await dst.read())).toEqual(ref.offs);
      expect(Array.from(await rowOf.read())).toEqual(rowOfWant);
      expect(Array.from(await tokenIndex.read())).toEqual(tiWant);
      expect(Array.from(await tokenKs.read())).toEqual(ksWant);
    };
    const a = randomIds(mulberry32(7), Tn, En, kn);
    // The last expert absent: the four-pass place writes no count for it, so a count left by the run
    // before (which had it in every block) would shift the rows.
    const b = Int32Array.from({ length: Tn * kn }, (_, i) => i % (En - 1));
    const bad = Int32Array.from(a);
    bad[Tn + 1] = En;
    ids.write(bad);
    prim.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'out of range');
    ids.write(a);
    prim.execute(strm, args);
    await strm.wait();
    await check(a);
    ids.write(b);
    prim.execute(strm, args);
    prim.execute(strm, args);
    await strm.wait();
    await check(b);
    prim.destroy();
  });
});
