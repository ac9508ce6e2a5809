/**
 * moe.routing on the gpu engine (SwiftShader in CI): the cpu tests' parameter cases against the float64
 * reference and against the cpu engine (ids exactly, weights within GPU_VS_CPU_ULPS), the by-hand
 * semantics and tie rules, runtime-data errors found on the device (nothing written), determinism,
 * the refusal of a host customRoutingFunction and the execute argument rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, DnnlError, Engine, GpuEngine, GpuMemory, Memory, Stream, memory, moe, tag, type DataType,
} from '../src/index.js';
import type { RoutingOptions } from '../src/primitives/moe/routing/index.js';
import { gpuRoutingTuning } from '../src/primitives/moe/routing/webgpu_routing.js';
import { gpuEngine } from './gpu_helpers.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { PARAMETER_CASES, expectMatchesF64, expectWeightsClose, separatedCase, type Case } from './moe_routing_cases.js';

/**
 * Weights vs the cpu engine, in f32 ulps. The kernel repeats the cpu's f32 operations in its order
 * with the cpu's exp polynomial (wgsl_vmath.ts), and SwiftShader gives the cpu's bits (0 ulps); a
 * driver may fuse multiply-adds of the polynomial (SPIR-V allows the contraction) and WGSL's division
 * is good to 2.5 ulps, so a few ulps per score and per renormalization are allowed.
 */
const GPU_VS_CPU_ULPS = 8;

const SENTINEL_ID = -7;
const SENTINEL_W = 12345;

let gpu: GpuEngine;
let cpu: Engine;
beforeAll(async () => {
  gpu = await gpuEngine();
  cpu = await Engine.create({ threads: 1, kernels: 'simd128' });
});
afterAll(() => {
  gpu?.release();
  cpu?.release();
});

interface Outcome {
  readonly ids: Int32Array;
  readonly weights: Float32Array;
  readonly implInfo: string;
}

interface Prepared {
  readonly strm: Stream;
  readonly prim: moe.routing.Primitive;
  readonly args: Record<number, Memory | GpuMemory>;
  readonly ids: Memory | GpuMemory;
  readonly weights: Memory | GpuMemory;
}

function prepare(eng: Engine | GpuEngine, c: Case): Prepared {
  const md = memory.desc([c.T, c.E], c.dt ?? 'f32', c.layout ?? tag.ab);
  const src = Memory.create(md, eng);
  const span = new Float64Array(src.elementCount).fill(Number.NaN); // padding of strided layouts is never read
  const [st, se] = md.strides;
  for (let t = 0; t < c.T; t++) for (let e = 0; e < c.E; e++) span[t * st + e * se] = c.logits[t * c.E + e];
  src.write(span);
  const pd = new moe.routing.PrimitiveDesc(eng, md, c.options);
  const ids = Memory.create(pd.queryMd('topk_ids')!, eng).write(new Array<number>(c.T * c.options.topK).fill(SENTINEL_ID));
  const weights = Memory.create(pd.queryMd('topk_weights')!, eng).write(new Array<number>(c.T * c.options.topK).fill(SENTINEL_W));
  const args: Record<number, Memory | GpuMemory> = { [ARG.SRC]: src, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: weights };
  if (c.bias) args[ARG.MOE_CORRECTION_BIAS] = Memory.create(pd.queryMd('correction_bias')!, eng).write(c.bias);
  return { strm: new Stream(eng), prim: new moe.routing.Primitive(pd), args, ids, weights };
}

async function readBack(m: Memory | GpuMemory): Promise<ArrayLike<number>> {
  return m instanceof GpuMemory ? m.read() : m.read();
}

async function run(eng: Engine | GpuEngine, c: Case): Promise<Outcome> {
  const p = prepare(eng, c);
  p.prim.execute(p.strm, p.args);
  await p.strm.wait();
  return { ids: Int32Array.from(await readBack(p.ids)), weights: Float32Array.from(await readBack(p.weights)), implInfo: p.prim.pd.implInfo };
}

/** Runs a case whose execution must fail on the gpu; checks that nothing was written. */
async function runRejected(c: Case, fragment: string): Promise<DnnlError> {
  const p = prepare(gpu, c);
  p.prim.execute(p.strm, p.args);
  const err = await expectDnnlReject(p.strm.wait(), 'invalid_arguments', fragment);
  expect(Array.from(await readBack(p.ids)).every((v) => v === SENTINEL_ID), 'ids untouched').toBe(true);
  expect(Array.from(await readBack(p.weights)).every((v) => v === SENTINEL_W), 'weights untouched').toBe(true);
  return err;
}

/** |a - b| in f32 ulps (both finite, same sign or zero). */
function ulps(a: number, b: number): number {
  const f = new Float32Array([a, b]);
  const i = new Int32Array(f.buffer);
  return Math.abs(i[0] - i[1]);
}

function expectSameAsCpu(g: Outcome, h: Outcome, what: string): void {
  expect(Array.from(g.ids), `${what}: ids`).toEqual(Array.from(h.ids));
  for (let i = 0; i < g.weights.length; i++) {
    if (ulps(g.weights[i], h.weights[i]) > GPU_VS_CPU_ULPS) throw new Error(`${what}: weights[${i}] gpu ${g.weights[i]} cpu ${h.weights[i]}`);
  }
}

describe('gpu moe.routing matches the float64 reference and the cpu engine', () => {
  for (const [name, make] of PARAMETER_CASES) {
    it(name, async () => {
      const c = make();
      const g = await run(gpu, c);
      expect(g.implInfo).toBe(`webgpu:moe-routing-${c.options.scoring ?? 'softmax'}-${(c.options.groupCount ?? 1) > 1 ? 'grouped-topk' : 'topk'}`);
      expectMatchesF64(g, c, name);
      expectSameAsCpu(g, await run(cpu, c), name);
    });
  }

  it('E 1024 with a correction bias (scores in the storage scratch, not per-invocation arrays), T 70 (two workgroups)', async () => {
    const c = separatedCase(90, 70, 1024, { topK: 8, scoring: 'sigmoid', renormalize: true, correctionBias: true, groupCount: 16, kGroup: 4, groupSelectMode: 1 }, { biasAmplitude: 0.05 });
    const g = await run(gpu, c);
    expectMatchesF64(g, c, 'E 1024');
    expectSameAsCpu(g, await run(cpu, c), 'E 1024');
  });

  it('T = 0 writes nothing and reports nothing', async () => {
    const r = await run(gpu, { T: 0, E: 8, logits: [], options: { topK: 2 } });
    expect(r.ids.length).toBe(0);
  });

  it('a second run gives the same bits', async () => {
    const c = separatedCase(51, 101, 256, { topK: 8, scoring: 'sigmoid', groupCount: 8, kGroup: 4, groupSelectMode: 1, correctionBias: true, renormalize: true, routedScalingFactor: 2.5 }, { biasAmplitude: 0.1 });
    const bits = (r: Outcome): number[] => [...Array.from(r.ids), ...Array.from(new Uint32Array(r.weights.buffer, r.weights.byteOffset, r.weights.length))];
    const a = await run(gpu, c), b = await run(gpu, c);
    expect(bits(b)).toEqual(bits(a));
  });
});

describe('gpu moe.routing semantics and ties, by hand', () => {
  it('the correction bias changes the selection, never the weights', async () => {
    const logits = [2, 1, 0, -1];
    const ex = logits.map((v) => Math.exp(v));
    const s = ex.map((v) => v / ex.reduce((a, b) => a + b));
    expect(Array.from((await run(gpu, { T: 1, E: 4, logits, options: { topK: 2 } })).ids)).toEqual([0, 1]);
    const biased = await run(gpu, { T: 1, E: 4, logits, options: { topK: 2, correctionBias: true }, bias: [0, 0, 0, 1] });
    expect(Array.from(biased.ids)).toEqual([3, 0]);
    expectWeightsClose(biased.weights, [s[3], s[0]], 'biased');
    const renorm = await run(gpu, { T: 1, E: 4, logits, options: { topK: 2, correctionBias: true, renormalize: true }, bias: [0, 0, 0, 1] });
    expectWeightsClose(renorm.weights, [s[3] / (s[3] + s[0]), s[0] / (s[3] + s[0])], 'biased renormalized');
  });

  it('sigmoid weights: renormalized on request, then scaled', async () => {
    const logits = [0.5, -1, 2, 0];
    const sg = logits.map((v) => 1 / (1 + Math.exp(-v)));
    const r = await run(gpu, { T: 1, E: 4, logits, options: { topK: 2, scoring: 'sigmoid', routedScalingFactor: 2 } });
    expect(Array.from(r.ids)).toEqual([2, 0]);
    expectWeightsClose(r.weights, [2 * sg[2], 2 * sg[0]], 'sigmoid');
    const n = await run(gpu, { T: 1, E: 4, logits, options: { topK: 2, scoring: 'sigmoid', renormalize: true, routedScalingFactor: 2 } });
    expectWeightsClose(n.weights, [2 * sg[2] / (sg[2] + sg[0]), 2 * sg[0] / (sg[2] + sg[0])], 'sigmoid renormalized');
  });

  it('grouped selection picks groups first (a strong expert in a weak group loses)', async () => {
    const logits = [5, -3, 4.5, 4.5, 0, 0, 1, 1];
    const ids = async (o: RoutingOptions): Promise<number[]> => Array.from((await run(gpu, { T: 1, E: 8, logits, options: o })).ids);
    expect(await ids({ topK: 2, groupCount: 4, kGroup: 1, groupSelectMode: 0 })).toEqual([0, 1]);
    expect(await ids({ topK: 2, groupCount: 4, kGroup: 1, groupSelectMode: 1 })).toEqual([2, 3]);
    expect(await ids({ topK: 3, groupCount: 4, kGroup: 2, groupSelectMode: 1 })).toEqual([0, 2, 3]);
  });

  it('ties go to the lower index: equal logits, equal group scores, equal selection scores through the bias', async () => {
    const flat = await run(gpu, { T: 2, E: 8, logits: new Array<number>(16).fill(0.25), options: { topK: 3 } });
    expect(Array.from(flat.ids)).toEqual([0, 1, 2, 0, 1, 2]);
    expectWeightsClose(flat.weights, new Array<number>(6).fill(1 / 8), 'uniform softmax');
    const renorm = await run(gpu, { T: 1, E: 8, logits: new Array<number>(8).fill(-3), options: { topK: 3, renormalize: true, scoring: 'sigmoid' } });
    expectWeightsClose(renorm.weights, [1 / 3, 1 / 3, 1 / 3], 'uniform renormalized');
    expect(Array.from((await run(gpu, { T: 1, E: 6, logits: [0, 2, 1, 2, 2, 0], options: { topK: 4 } })).ids)).toEqual([1, 3, 4, 2]);
    expect(Array.from((await run(gpu, { T: 1, E: 6, logits: [0, 2, 1, 2, 2, 0], options: { topK: 6 } })).ids)).toEqual([1, 3, 4, 2, 0, 5]);
    const logits = [1, 0, 3, 0, 0, 3, 2, 2];
    expect(Array.from((await run(gpu, { T: 1, E: 8, logits, options: { topK: 2, groupCount: 4, kGroup: 1 } })).ids)).toEqual([2, 3]);
    expect(Array.from((await run(gpu, { T: 1, E: 8, logits, options: { topK: 2, groupCount: 4, kGroup: 2 } })).ids)).toEqual([2, 5]);
    const sum = await run(gpu, { T: 1, E: 8, logits: [3, 1, 1, 3, 0, 0, 2, 2], options: { topK: 2, groupCount: 4, kGroup: 1, groupSelectMode: 1 } });
    expect(Array.from(sum.ids)).toEqual([0, 1]);
    const bias = await run(gpu, { T: 1, E: 4, logits: [0, 0, 0, 0], options: { topK: 1, correctionBias: true }, bias: [0, 0.5, 0.5, 0] });
    expect(Array.from(bias.ids)).toEqual([1]);
    expectWeightsClose(bias.weights, [0.25], 'bias tie');
  });

  it('infinities: -inf under softmax scores 0 and ranks last; sigmoid takes both; all-underflow sigmoid gives zero renormalized weights', async () => {
    const masked = await run(gpu, { T: 1, E: 4, logits: [-Infinity, 0, -Infinity, 1], options: { topK: 4 } });
    expect(Array.from(masked.ids)).toEqual([3, 1, 0, 2]);
    expectWeightsClose(masked.weights, [Math.E / (1 + Math.E), 1 / (1 + Math.E), 0, 0], 'masked experts');
    for (const dt of ['f32', 'bf16', 'f16'] as const) {
      const sig = await run(gpu, { T: 1, E: 4, dt, logits: [-Infinity, 0, Infinity, 1], options: { topK: 4, scoring: 'sigmoid' } });
      expect(Array.from(sig.ids), dt).toEqual([2, 3, 1, 0]);
      expectWeightsClose(sig.weights, [1, 1 / (1 + Math.exp(-1)), 0.5, 0], `sigmoid infinities ${dt}`);
    }
    const under = await run(gpu, { T: 1, E: 4, logits: [-200, -300, -250, -Infinity], options: { topK: 2, scoring: 'sigmoid', renormalize: true } });
    expect(Array.from(under.ids)).toEqual([0, 1]);
    expect(Array.from(under.weights)).toEqual([0, 0]);
  });

  it('f16 subnormal logits are decoded exactly', async () => {
    // 2^-24 and 3 * 2^-24: tiny sigmoid differences still order the experts.
    const logits = [2 ** -24, 3 * 2 ** -24, 0, -(2 ** -24)];
    const r = await run(gpu, { T: 1, E: 4, dt: 'f16', logits, options: { topK: 4, scoring: 'sigmoid' } });
    expect(Array.from(r.ids)).toEqual(Array.from((await run(cpu, { T: 1, E: 4, dt: 'f16', logits, options: { topK: 4, scoring: 'sigmoid' } })).ids));
  });
});

describe('gpu moe.routing runtime data errors (found on the device, nothing written)', () => {
  const nanCase = (dt: DataType): Case => {
    const c = separatedCase(30, 40, 16, { topK: 2 }, { dt });
    const logits = Float64Array.from(c.logits);
    logits[21 * 16 + 3] = Number.NaN;
    logits[30 * 16 + 1] = Number.NaN;
    return { ...c, logits };
  };

  it('a NaN logit names the first bad token and expert (f32, bf16, f16; softmax and sigmoid)', async () => {
    for (const dt of ['f32', 'bf16', 'f16'] as const) await runRejected(nanCase(dt), 'moe.routing: ARG.SRC token 21: the logit of expert 3 is NaN');
    await runRejected({ ...nanCase('f32'), options: { topK: 2, scoring: 'sigmoid' } }, 'token 21: the logit of expert 3 is NaN');
  });

  it('softmax rejects +inf and all -inf tokens; the error is the cpu engine\'s', async () => {
    const base = new Array<number>(5 * 4).fill(0).map((_, i) => (i % 4) * 0.5);
    const posInf = [...base];
    posInf[2 * 4 + 1] = Infinity;
    await runRejected({ T: 5, E: 4, logits: posInf, options: { topK: 2 } }, 'token 2: the logit of expert 1 is +inf');
    const allNeg = [...base];
    allNeg.fill(-Infinity, 12, 16);
    await runRejected({ T: 5, E: 4, logits: allNeg, options: { topK: 2 } }, 'token 3: every logit is -inf');
    await runRejected({ T: 5, E: 4, dt: 'f16', logits: allNeg, options: { topK: 2 } }, 'token 3: every logit is -inf');
  });

  it('a non-finite correction bias names the expert; a bad token ranks before a bad bias', async () => {
    const c = separatedCase(31, 20, 8, { topK: 2, correctionBias: true }, { biasAmplitude: 0.01 });
    for (const bad of [Number.NaN, Infinity, -Infinity]) {
      const bias = Float64Array.from(c.bias!);
      bias[5] = bad;
      await runRejected({ ...c, bias }, 'moe.routing: ARG.MOE_CORRECTION_BIAS[5] is not finite');
    }
    const bias = Float64Array.from(c.bias!);
    bias[2] = Number.NaN;
    const logits = Float64Array.from(c.logits);
    logits[19 * 8 + 6] = Number.NaN;
    await runRejected({ ...c, bias, logits }, 'token 19: the logit of expert 6 is NaN');
  });

  it('the check pass (T > 32) with E > its workgroup: a bad bias past expert 64, then an all -inf token and a NaN past expert 64 ranking before it', async () => {
    const c = separatedCase(35, 40, 100, { topK: 3, correctionBias: true }, { biasAmplitude: 0.01 });
    const bias = Float64Array.from(c.bias!);
    bias[90] = Infinity;
    await runRejected({ ...c, bias }, 'moe.routing: ARG.MOE_CORRECTION_BIAS[90] is not finite');
    const logits = Float64Array.from(c.logits);
    logits.fill(-Infinity, 37 * 100, 38 * 100);
    await runRejected({ ...c, bias, logits }, 'token 37: every logit is -inf');
    logits[33 * 100 + 77] = Number.NaN;
    await runRejected({ ...c, bias, logits }, 'token 33: the logit of expert 77 is NaN');
  });

  it('two executions in one submit: each has its own status slot; the bad one writes nothing, the good one writes', async () => {
    const good = separatedCase(33, 40, 16, { topK: 2 });
    const g = prepare(gpu, good), b = prepare(gpu, nanCase('f32'));
    const strm = new Stream(gpu);
    g.prim.execute(strm, g.args);
    b.prim.execute(strm, b.args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'token 21: the logit of expert 3 is NaN');
    expectMatchesF64({ ids: Int32Array.from(await readBack(g.ids)), weights: Float32Array.from(await readBack(g.weights)) }, good, 'good run before the bad one');
    expect(Array.from(await readBack(b.ids)).every((v) => v === SENTINEL_ID)).toBe(true);
  });

  it('an error does not leak into the next wait; a later good run still writes', async () => {
    const bad = nanCase('f32');
    await runRejected(bad, 'token 21');
    const good = separatedCase(30, 40, 16, { topK: 2 });
    expectMatchesF64(await run(gpu, good), good, 'after an error');
  });
});

describe('gpu moe.routing rules', () => {
  const md = (dims: number[], dt: DataType = 'f32'): ReturnType<typeof memory.desc> => memory.desc(dims, dt, dims.length === 2 ? tag.ab : tag.a);

  it('a customRoutingFunction (a host function) is refused as unimplemented, naming the option', () => {
    const err = expectDnnlError(() => new moe.routing.PrimitiveDesc(gpu, md([4, 8]), { topK: 2, customRoutingFunction: () => ({ ids: [], weights: [] }) }), 'unimplemented', 'moe.routing: no implementation for T4:E8:k2:custom');
    expect(err.message).toContain('customRoutingFunction is a host function');
  });

  it('the pd rules and messages are the cpu engine\'s', () => {
    expectDnnlError(() => new moe.routing.PrimitiveDesc(gpu, md([4, 8]), { topK: 9 }), 'invalid_arguments', 'moe.routing: topK must be an integer in [1, E = 8], got 9');
    expectDnnlError(() => new moe.routing.PrimitiveDesc(gpu, md([4, 8], 's8'), { topK: 2 }), 'unimplemented', 'moe.routing: src (logits) data type s8 is not supported');
    expectDnnlError(() => new moe.routing.PrimitiveDesc(gpu, md([4, 8]), { topK: 3, groupCount: 4, kGroup: 1 }), 'invalid_arguments', 'topK 3 exceeds the 2 experts');
    const pd = new moe.routing.PrimitiveDesc(gpu, memory.desc([5, 12], 'bf16', tag.any), { topK: 3, correctionBias: true });
    expect(pd.queryMd('src')!.equals(memory.desc([5, 12], 'bf16', tag.ab))).toBe(true);
    expect(pd.implInfo).toBe('webgpu:moe-routing-softmax-topk');
  });

  it('execute rules: missing, mismatched, shared-buffer or foreign arguments', async () => {
    const strm = new Stream(gpu);
    const T = 4, E = 8, k = 2;
    const pd = new moe.routing.PrimitiveDesc(gpu, md([T, E]), { topK: k, correctionBias: true });
    const prim = new moe.routing.Primitive(pd);
    const src = Memory.create(md([T, E]), gpu).write(new Array<number>(T * E).fill(0));
    const ids = Memory.create(md([T, k], 's32'), gpu);
    const w = Memory.create(md([T, k]), gpu);
    const bias = Memory.create(md([E]), gpu).write(new Array<number>(E).fill(0));
    const full = { [ARG.SRC]: src, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.MOE_CORRECTION_BIAS]: bias };
    const F = 'moe.routing.execute: ';
    const exec = (args: Record<number, unknown>) => () => prim.execute(strm, args as Record<number, GpuMemory>);
    expectDnnlError(exec({ ...full, [ARG.SRC]: undefined }), 'invalid_arguments', `${F}missing argument ARG.SRC`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_IDS]: Memory.create(md([T, k], 'f32'), gpu) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS descriptor f32`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_WEIGHTS]: Memory.create(md([T, k]), gpu, ids.handles[0]) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS values overlap ARG.MOE_TOPK_WEIGHTS values`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_WEIGHTS]: Memory.create(md([T, k]), gpu, src.handles[0]) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_WEIGHTS values overlap ARG.SRC values`);
    expectDnnlError(exec({ ...full, [ARG.SRC]: Memory.create(md([T, E]), cpu) }), 'invalid_arguments', `${F}ARG.SRC belongs to another engine`);
    expectDnnlError(() => prim.execute(new Stream(cpu), full), 'invalid_arguments', `${F}stream belongs to another engine`);
    const freed = Memory.create(md([T, k], 's32'), gpu);
    freed.free();
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_IDS]: freed }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS was freed`);
    prim.execute(strm, full);
    await strm.wait();
    expect(Array.from(await ids.read())).toEqual([0, 1, 0, 1, 0, 1, 0, 1]);
  });
});

describe('gpu moe.routing at decode sizes: the route kernel checks the logits itself (one dispatch), same bits and errors as the check pass', () => {
  /** Runs `fn` with the in-kernel check on, then off (the check pass). */
  async function both<T>(fn: () => Promise<T>): Promise<[T, T]> {
    const out: T[] = [];
    for (const checked of [true, false]) {
      gpuRoutingTuning.checked = checked;
      try {
        out.push(await fn());
      } finally {
        gpuRoutingTuning.checked = true;
      }
    }
    return [out[0], out[1]];
  }

  it('good logits (softmax with a bias, sigmoid grouped; T = 1, 7, 32): the float64 reference, and the check pass\'s bits', async () => {
    const cases: Case[] = [
      separatedCase(41, 1, 64, { topK: 6, renormalize: true }),
      separatedCase(42, 7, 16, { topK: 2, correctionBias: true }, { biasAmplitude: 0.01 }),
      separatedCase(43, 32, 16, { topK: 4, scoring: 'sigmoid', groupCount: 4, kGroup: 2 }),
    ];
    for (const c of cases) {
      const [a, b] = await both(() => run(gpu, c));
      expectMatchesF64(a, c, `T ${c.T}`);
      expect(Array.from(a.ids)).toEqual(Array.from(b.ids));
      expect(Buffer.from(a.weights.buffer).equals(Buffer.from(b.weights.buffer))).toBe(true);
    }
  });

  it('NaN (two bad tokens: the first named), +inf, all -inf, a bad bias, a bad token before a bad bias: the same message, nothing written', async () => {
    const nan = separatedCase(44, 31, 16, { topK: 2 });
    const nanLogits = Float64Array.from(nan.logits);
    nanLogits[29 * 16 + 9] = Number.NaN;
    nanLogits[12 * 16 + 3] = Number.NaN;
    const base = new Array<number>(5 * 4).fill(0).map((_, i) => (i % 4) * 0.5);
    const posInf = [...base];
    posInf[2 * 4 + 1] = Infinity;
    posInf[4 * 4 + 0] = Number.NaN;
    const allNeg = [...base];
    allNeg.fill(-Infinity, 12, 16);
    const biased = separatedCase(45, 20, 8, { topK: 2, correctionBias: true }, { biasAmplitude: 0.01 });
    const badBias = Float64Array.from(biased.bias!);
    badBias[5] = Infinity;
    const badTok = Float64Array.from(biased.logits);
    badTok[19 * 8 + 6] = Number.NaN;
    const cases: [Case, string][] = [
      [{ ...nan, logits: nanLogits }, 'token 12: the logit of expert 3 is NaN'],
      [{ T: 5, E: 4, logits: posInf, options: { topK: 2 } }, 'token 2: the logit of expert 1 is +inf'],
      [{ T: 5, E: 4, dt: 'f16', logits: allNeg, options: { topK: 2 } }, 'token 3: every logit is -inf'],
      [{ ...biased, bias: badBias }, 'ARG.MOE_CORRECTION_BIAS[5] is not finite'],
      [{ ...biased, bias: badBias, logits: badTok }, 'token 19: the logit of expert 6 is NaN'],
    ];
    for (const [c, msg] of cases) {
      const [a, b] = await both(() => runRejected(c, msg));
      expect(a.message).toBe(b.message);
    }
  });
});
