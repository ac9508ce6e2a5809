import { afterAll, describe, expect, it } from 'vitest';
import {
  ARG, DnnlError, Engine, Memory, RUNTIME_DIM_VAL, Stream, memory, moe, tag, type DataType, type EngineOptions,
} from '../src/index.js';
import type { RoutingOptions } from '../src/primitives/moe/routing/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { PARAMETER_CASES, expectMatchesF64, expectWeightsClose, separatedCase, type Case } from './moe_routing_cases.js';
import { mulberry32 } from './workloads.js';

// ---------------------------------------------------------------------------------------------------
// Plumbing

const engines = new Map<string, Engine>();
afterAll(() => engines.forEach((e) => e.release()));

async function engineFor(o: EngineOptions): Promise<Engine> {
  const key = `${o.kernels}:${o.threads}`;
  let e = engines.get(key);
  if (!e) {
    e = await Engine.create(o);
    engines.set(key, e);
  }
  return e;
}

/** The implementation families: both wasm builds, and the reference (engine without kernels). */
const CONFIGS: ReadonlyArray<readonly [string, EngineOptions]> = [
  ['wasm simd128', { threads: 1, kernels: 'simd128' }],
  ['wasm relaxed', { threads: 1, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
];

const SENTINEL_ID = -7;
const SENTINEL_W = 12345;


interface Outcome {
  readonly ids: Int32Array;
  readonly weights: Float32Array;
  readonly implInfo: string;
}

interface Prepared {
  readonly strm: Stream;
  readonly prim: moe.routing.Primitive;
  readonly args: Record<number, Memory>;
  readonly ids: Memory;
  readonly weights: Memory;
}

function logitsMemory(eng: Engine, c: Case): Memory {
  const md = memory.desc([c.T, c.E], c.dt ?? 'f32', c.layout ?? tag.ab);
  const m = Memory.create(md, eng);
  const span = new Float64Array(m.elementCount).fill(Number.NaN); // padding of strided layouts is never read
  const [st, se] = md.strides;
  for (let t = 0; t < c.T; t++) for (let e = 0; e < c.E; e++) span[t * st + e * se] = c.logits[t * c.E + e];
  return m.write(span);
}

function prepare(eng: Engine, c: Case): Prepared {
  const src = logitsMemory(eng, c);
  const pd = new moe.routing.PrimitiveDesc(eng, src.desc, c.options);
  const ids = Memory.create(pd.queryMd('topk_ids')!, eng);
  const weights = Memory.create(pd.queryMd('topk_weights')!, eng);
  (ids.values as Int32Array).fill(SENTINEL_ID);
  (weights.values as Float32Array).fill(SENTINEL_W);
  const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: weights };
  if (c.bias) args[ARG.MOE_CORRECTION_BIAS] = Memory.create(pd.queryMd('correction_bias')!, eng).write(c.bias);
  return { strm: new Stream(eng), prim: new moe.routing.Primitive(pd), args, ids, weights };
}

async function run(eng: Engine, c: Case): Promise<Outcome> {
  const p = prepare(eng, c);
  p.prim.execute(p.strm, p.args);
  await p.strm.wait();
  return { ids: (p.ids.values as Int32Array).slice(), weights: (p.weights.values as Float32Array).slice(), implInfo: p.prim.pd.implInfo };
}

/** Runs a case whose execution must fail; returns the error after checking that nothing was written. */
async function runRejected(eng: Engine, c: Case, status: 'invalid_arguments' | 'runtime_error', fragment: string | RegExp): Promise<DnnlError> {
  const p = prepare(eng, c);
  p.prim.execute(p.strm, p.args);
  const err = await expectDnnlReject(p.strm.wait(), status, fragment);
  expect((p.ids.values as Int32Array).every((v) => v === SENTINEL_ID)).toBe(true);
  expect((p.weights.values as Float32Array).every((v) => v === SENTINEL_W)).toBe(true);
  return err;
}

describe('moe.routing matches the float64 reference', () => {
  for (const [cfgName, cfg] of CONFIGS) {
    for (const [name, make] of PARAMETER_CASES) {
      it(`${cfgName}: ${name}`, async () => {
        const c = make();
        const r = await run(await engineFor(cfg), c);
        expect(r.implInfo).toBe(cfg.kernels === 'none' ? 'ref:any' : `wasm:${cfg.kernels}:moe-route`);
        expectMatchesF64(r, c, name);
      });
    }
  }

  it('T = 0 writes nothing and reports nothing', async () => {
    for (const [, cfg] of CONFIGS) {
      const r = await run(await engineFor(cfg), { T: 0, E: 8, logits: [], options: { topK: 2 } });
      expect(r.ids.length).toBe(0);
    }
  });
});

describe('moe.routing semantics, by hand', () => {
  for (const [cfgName, cfg] of CONFIGS) {
    it(`${cfgName}: the correction bias changes the selection, never the weights`, async () => {
      const eng = await engineFor(cfg);
      const logits = [2, 1, 0, -1];
      const ex = logits.map((v) => Math.exp(v));
      const s = ex.map((v) => v / ex.reduce((a, b) => a + b));
      const plain = await run(eng, { T: 1, E: 4, logits, options: { topK: 2 } });
      expect(Array.from(plain.ids)).toEqual([0, 1]);
      const biased = await run(eng, { T: 1, E: 4, logits, options: { topK: 2, correctionBias: true }, bias: [0, 0, 0, 1] });
      expect(Array.from(biased.ids)).toEqual([3, 0]);
      expectWeightsClose(biased.weights, [s[3], s[0]], 'biased');
      const renorm = await run(eng, { T: 1, E: 4, logits, options: { topK: 2, correctionBias: true, renormalize: true }, bias: [0, 0, 0, 1] });
      expectWeightsClose(renorm.weights, [s[3] / (s[3] + s[0]), s[0] / (s[3] + s[0])], 'biased renormalized');
    });

    it(`${cfgName}: sigmoid weights are the sigmoid of the logit, renormalized on request, then scaled`, async () => {
      const eng = await engineFor(cfg);
      const logits = [0.5, -1, 2, 0];
      const sg = logits.map((v) => 1 / (1 + Math.exp(-v)));
      const r = await run(eng, { T: 1, E: 4, logits, options: { topK: 2, scoring: 'sigmoid', routedScalingFactor: 2 } });
      expect(Array.from(r.ids)).toEqual([2, 0]);
      expectWeightsClose(r.weights, [2 * sg[2], 2 * sg[0]], 'sigmoid');
      const n = await run(eng, { T: 1, E: 4, logits, options: { topK: 2, scoring: 'sigmoid', renormalize: true, routedScalingFactor: 2 } });
      expectWeightsClose(n.weights, [2 * sg[2] / (sg[2] + sg[0]), 2 * sg[0] / (sg[2] + sg[0])], 'sigmoid renormalized');
    });

    it(`${cfgName}: grouped selection picks groups first (a strong expert in a weak group loses)`, async () => {
      const eng = await engineFor(cfg);
      // Groups of 2: g0 = {5, -3} has the best expert, g1 = {4.5, 4.5} the best top-2 sum (2 e^4.5 > e^5 + e^-3).
      const logits = [5, -3, 4.5, 4.5, 0, 0, 1, 1];
      const max = await run(eng, { T: 1, E: 8, logits, options: { topK: 2, groupCount: 4, kGroup: 1, groupSelectMode: 0 } });
      expect(Array.from(max.ids)).toEqual([0, 1]);
      const sum = await run(eng, { T: 1, E: 8, logits, options: { topK: 2, groupCount: 4, kGroup: 1, groupSelectMode: 1 } });
      expect(Array.from(sum.ids)).toEqual([2, 3]);
      const two = await run(eng, { T: 1, E: 8, logits, options: { topK: 3, groupCount: 4, kGroup: 2, groupSelectMode: 1 } });
      expect(Array.from(two.ids)).toEqual([0, 2, 3]);
    });
  }
});

describe('moe.routing ties go to the lower index', () => {
  for (const [cfgName, cfg] of CONFIGS) {
    it(`${cfgName}: equal logits`, async () => {
      const eng = await engineFor(cfg);
      const flat = await run(eng, { T: 2, E: 8, logits: new Array(16).fill(0.25), options: { topK: 3 } });
      expect(Array.from(flat.ids)).toEqual([0, 1, 2, 0, 1, 2]);
      expectWeightsClose(flat.weights, new Array(6).fill(1 / 8), 'uniform softmax');
      const renorm = await run(eng, { T: 1, E: 8, logits: new Array(8).fill(-3), options: { topK: 3, renormalize: true, scoring: 'sigmoid' } });
      expectWeightsClose(renorm.weights, [1 / 3, 1 / 3, 1 / 3], 'uniform renormalized');
      const mid = await run(eng, { T: 1, E: 6, logits: [0, 2, 1, 2, 2, 0], options: { topK: 4 } });
      expect(Array.from(mid.ids)).toEqual([1, 3, 4, 2]);
      const all = await run(eng, { T: 1, E: 6, logits: [0, 2, 1, 2, 2, 0], options: { topK: 6 } });
      expect(Array.from(all.ids)).toEqual([1, 3, 4, 2, 0, 5]);
    });

    it(`${cfgName}: equal group scores (max and top-2 sum)`, async () => {
      const eng = await engineFor(cfg);
      const logits = [1, 0, 3, 0, 0, 3, 2, 2];
      const one = await run(eng, { T: 1, E: 8, logits, options: { topK: 2, groupCount: 4, kGroup: 1 } });
      expect(Array.from(one.ids)).toEqual([2, 3]);
      const two = await run(eng, { T: 1, E: 8, logits, options: { topK: 2, groupCount: 4, kGroup: 2 } });
      expect(Array.from(two.ids)).toEqual([2, 5]);
      // Mode 1: g0 = {3, 1} and g1 = {1, 3} have the same sum; g3 = {2, 2} is lower.
      const sum = await run(eng, { T: 1, E: 8, logits: [3, 1, 1, 3, 0, 0, 2, 2], options: { topK: 2, groupCount: 4, kGroup: 1, groupSelectMode: 1 } });
      expect(Array.from(sum.ids)).toEqual([0, 1]);
    });

    it(`${cfgName}: equal selection scores through the bias`, async () => {
      const eng = await engineFor(cfg);
      const r = await run(eng, { T: 1, E: 4, logits: [0, 0, 0, 0], options: { topK: 1, correctionBias: true }, bias: [0, 0.5, 0.5, 0] });
      expect(Array.from(r.ids)).toEqual([1]);
      expectWeightsClose(r.weights, [0.25], 'bias tie');
    });
  }
});

describe('moe.routing non-finite runtime data', () => {
  const nanCase = (dt: DataType): Case => {
    const c = separatedCase(30, 40, 16, { topK: 2 }, { dt });
    const logits = Float64Array.from(c.logits);
    logits[21 * 16 + 3] = Number.NaN;
    logits[30 * 16 + 1] = Number.NaN;
    return { ...c, logits };
  };
  const RUNTIME_CONFIGS: ReadonlyArray<readonly [string, EngineOptions]> = [
    ...CONFIGS, ['wasm 2 threads', { threads: 2, kernels: 'simd128' }], ['wasm 3 threads', { threads: 3, kernels: 'simd128' }],
  ];
  for (const [cfgName, cfg] of RUNTIME_CONFIGS) {
    it(`${cfgName}: a NaN logit is an error naming the first bad token, nothing written`, async () => {
      const eng = await engineFor(cfg);
      for (const dt of ['f32', 'bf16', 'f16'] as const) {
        await runRejected(eng, nanCase(dt), 'invalid_arguments', 'ARG.SRC token 21: the logit of expert 3 is NaN');
      }
      const sig = nanCase('f32');
      await runRejected(eng, { ...sig, options: { topK: 2, scoring: 'sigmoid' } }, 'invalid_arguments', 'token 21: the logit of expert 3 is NaN');
    });

    it(`${cfgName}: softmax rejects +inf and all -inf tokens; sigmoid takes both infinities`, async () => {
      const eng = await engineFor(cfg);
      const base = new Array(5 * 4).fill(0).map((_, i) => (i % 4) * 0.5);
      const posInf = [...base];
      posInf[2 * 4 + 1] = Infinity;
      await runRejected(eng, { T: 5, E: 4, logits: posInf, options: { topK: 2 } }, 'invalid_arguments', 'token 2: the logit of expert 1 is +inf');
      const allNeg = [...base];
      allNeg.fill(-Infinity, 12, 16);
      await runRejected(eng, { T: 5, E: 4, logits: allNeg, options: { topK: 2 } }, 'invalid_arguments', 'token 3: every logit is -inf');
      const sig = await run(eng, { T: 1, E: 4, logits: [-Infinity, 0, Infinity, 1], options: { topK: 4, scoring: 'sigmoid' } });
      expect(Array.from(sig.ids)).toEqual([2, 3, 1, 0]);
      expectWeightsClose(sig.weights, [1, 1 / (1 + Math.exp(-1)), 0.5, 0], 'sigmoid infinities');
    });

    it(`${cfgName}: -inf logits under softmax get score 0 and rank last`, async () => {
      const eng = await engineFor(cfg);
      const r = await run(eng, { T: 1, E: 4, logits: [-Infinity, 0, -Infinity, 1], options: { topK: 4 } });
      expect(Array.from(r.ids)).toEqual([3, 1, 0, 2]);
      const e = Math.E;
      expectWeightsClose(r.weights, [e / (1 + e), 1 / (1 + e), 0, 0], 'masked experts');
    });

    it(`${cfgName}: sigmoid scores that all underflow give zero renormalized weights`, async () => {
      const eng = await engineFor(cfg);
      const r = await run(eng, { T: 1, E: 4, logits: [-200, -300, -250, -Infinity], options: { topK: 2, scoring: 'sigmoid', renormalize: true } });
      expect(Array.from(r.ids)).toEqual([0, 1]);
      expect(Array.from(r.weights)).toEqual([0, 0]);
    });

    it(`${cfgName}: a non-finite correction bias is an error naming the expert`, async () => {
      const eng = await engineFor(cfg);
      const c = separatedCase(31, 20, 8, { topK: 2, correctionBias: true }, { biasAmplitude: 0.01 });
      for (const bad of [Number.NaN, Infinity, -Infinity]) {
        const bias = Float64Array.from(c.bias!);
        bias[5] = bad;
        await runRejected(eng, { ...c, bias }, 'invalid_arguments', 'ARG.MOE_CORRECTION_BIAS[5] is not finite');
      }
    });
  }
});

describe('moe.routing customRoutingFunction', () => {
  /** Chooses the k lowest logits (unlike any built-in rule), weights 1/(slot + 1), normalized on request. */
  const lowest: moe.routing.CustomRoutingFunction = (logits, T, E, k, renorm) => {
    const ids: number[] = [], weights: number[] = [];
    for (let t = 0; t < T; t++) {
      const order = [...Array(E).keys()].sort((a, b) => logits[t * E + a] - logits[t * E + b] || a - b).slice(0, k);
      const w = order.map((_, q) => 1 / (q + 1));
      const s = w.reduce((a, b) => a + b);
      ids.push(...order);
      weights.push(...w.map((v) => (renorm ? v / s : v)));
    }
    return { ids, weights };
  };

  for (const [cfgName, cfg] of CONFIGS) {
    it(`${cfgName}: its ids and weights (times routedScalingFactor) are the output; it sees the decoded logits`, async () => {
      const eng = await engineFor(cfg);
      for (const dt of ['f32', 'bf16'] as const) {
        const c = separatedCase(40, 7, 8, { topK: 3 }, { dt, layout: dt === 'bf16' ? 'ba' : 'ab' });
        const seen: { logits: number[]; T: number; E: number; k: number; renorm: boolean }[] = [];
        const fn: moe.routing.CustomRoutingFunction = (logits, T, E, k, renorm) => {
          seen.push({ logits: Array.from(logits), T, E, k, renorm });
          return lowest(logits, T, E, k, renorm);
        };
        const r = await run(eng, { ...c, options: { topK: 3, renormalize: true, routedScalingFactor: 3, customRoutingFunction: fn } });
        expect(r.implInfo).toBe('host:custom_routing_function');
        expect(seen.length).toBe(1);
        expect(seen[0]).toEqual({ logits: Array.from(c.logits), T: 7, E: 8, k: 3, renorm: true });
        const want = lowest(Float32Array.from(c.logits), 7, 8, 3, true);
        expect(Array.from(r.ids)).toEqual(Array.from(want.ids));
        expectWeightsClose(r.weights, Array.from(want.weights, (w) => 3 * w), 'custom');
      }
    });

    it(`${cfgName}: an invalid result is an error, nothing written`, async () => {
      const eng = await engineFor(cfg);
      const c = separatedCase(41, 3, 6, { topK: 2 });
      const good = lowest(Float32Array.from(c.logits), 3, 6, 2, false);
      const withIds = (ids: unknown[]): moe.routing.CustomRoutingFunction => () => ({ ids: ids as number[], weights: good.weights });
      const withWeights = (weights: number[]): moe.routing.CustomRoutingFunction => () => ({ ids: good.ids, weights });
      const ids = Array.from(good.ids), w = Array.from(good.weights);
      const cases: [moe.routing.CustomRoutingFunction, string | RegExp][] = [
        [withIds(ids.slice(1)), 'ids has 5 entries, expected T * topK = 3 x 2 = 6'],
        [withWeights([...w, 1]), 'weights has 7 entries, expected T * topK = 3 x 2 = 6'],
        [withIds([...ids.slice(0, 3), 6, ...ids.slice(4)]), 'ids[3] (token 1, slot 1) = 6 is not an integer expert id in [0, E = 6)'],
        [withIds([-1, ...ids.slice(1)]), 'ids[0] (token 0, slot 0) = -1 is not'],
        [withIds([...ids.slice(0, 5), 1.5]), 'ids[5] (token 2, slot 1) = 1.5 is not'],
        [withIds([Number.NaN, ...ids.slice(1)]), 'ids[0] (token 0, slot 0) = NaN is not'],
        [withIds(['1', ...ids.slice(1)]), 'ids[0] (token 0, slot 0) = 1 is not'],
        [withIds([...ids.slice(0, 4), ids[4], ids[4]]), `token 2 chooses expert ${ids[4]} twice (slots 0 and 1)`],
        [withWeights([...w.slice(0, 2), Number.NaN, ...w.slice(3)]), 'weights[2] (token 1, slot 0) = NaN is not a finite number'],
        [withWeights([...w.slice(0, 2), -Infinity, ...w.slice(3)]), 'weights[2] (token 1, slot 0) = -Infinity is not a finite number'],
        [withWeights([3e38, ...w.slice(1)]), 'overflows f32'],
        [() => ({ ids: 5, weights: w }) as unknown as moe.routing.CustomRoutingResult, 'ids must be an array-like'],
        [() => null as unknown as moe.routing.CustomRoutingResult, 'must be an object { weights, ids }'],
      ];
      for (const [fn, fragment] of cases) {
        await runRejected(eng, { ...c, options: { topK: 2, routedScalingFactor: 2, customRoutingFunction: fn } }, 'invalid_arguments', fragment);
      }
      const thrower: moe.routing.CustomRoutingFunction = () => {
        throw new Error('router exploded');
      };
      await runRejected(eng, { ...c, options: { topK: 2, customRoutingFunction: thrower } }, 'runtime_error', 'customRoutingFunction threw: router exploded');
    });
  }
});

describe('moe.routing determinism', () => {
  const cases: ReadonlyArray<readonly [string, () => Case]> = [
    ['MoE-B softmax renormalize, T 256 E 64 k 6', () => separatedCase(50, 256, 64, { topK: 6, renormalize: true })],
    ['DeepSeek-V3 sigmoid grouped with bias, T 101', () => separatedCase(51, 101, 256, { topK: 8, scoring: 'sigmoid', groupCount: 8, kGroup: 4, groupSelectMode: 1, correctionBias: true, renormalize: true, routedScalingFactor: 2.5 }, { biasAmplitude: 0.1 })],
    ['bf16 strided, T 77', () => separatedCase(52, 77, 40, { topK: 5, scoring: 'sigmoid', groupCount: 5, kGroup: 3 }, { dt: 'bf16', layout: [48, 1] })],
  ];
  for (const [name, make] of cases) {
    it(`bitwise identical for 1, 2, 3 threads and both wasm builds: ${name}`, async () => {
      const c = make();
      const base = await run(await engineFor({ threads: 1, kernels: 'simd128' }), c);
      expectMatchesF64(base, c, name);
      const bits = (r: Outcome): number[] => [...Array.from(r.ids), ...Array.from(new Uint32Array(r.weights.buffer, r.weights.byteOffset, r.weights.length))];
      for (const o of [{ threads: 2, kernels: 'simd128' }, { threads: 3, kernels: 'simd128' }, { threads: 1, kernels: 'relaxed' }, { threads: 3, kernels: 'relaxed' }] as const) {
        const r = await run(await engineFor(o), c);
        expect(bits(r), `${o.kernels} ${o.threads} threads`).toEqual(bits(base));
      }
    });
  }

  it('wasm and the reference implementation agree on random data (ids exactly, weights closely)', async () => {
    const wasm = await engineFor({ threads: 2, kernels: 'simd128' }), ref = await engineFor({ threads: 1, kernels: 'none' });
    for (let seed = 60; seed < 66; seed++) {
      const rng = mulberry32(seed);
      const E = [8, 16, 64, 128, 256, 24][seed - 60];
      const groupCount = E % 8 === 0 && E >= 16 ? 8 : 4;
      const options: RoutingOptions = {
        topK: Math.min(E / 2, 1 + Math.floor(rng() * 8)), scoring: rng() < 0.5 ? 'softmax' : 'sigmoid', renormalize: rng() < 0.5,
        groupCount, kGroup: groupCount / 2, groupSelectMode: rng() < 0.5 ? 0 : 1, correctionBias: true,
      };
      const c = separatedCase(seed, 50, E, options, { biasAmplitude: 0.05 * rng() + 0.001 });
      const a = await run(wasm, c), b = await run(ref, c);
      expect(a.implInfo.startsWith('wasm:')).toBe(true);
      expect(b.implInfo).toBe('ref:any');
      expect(Array.from(a.ids)).toEqual(Array.from(b.ids));
      expectWeightsClose(a.weights, Float64Array.from(b.weights), `seed ${seed}`);
    }
  });
});

describe('moe.routing validation', () => {
  const md = (dims: number[], dt: DataType = 'f32'): ReturnType<typeof memory.desc> => memory.desc(dims, dt, dims.length === 2 ? tag.ab : dims.length === 1 ? tag.a : tag.abc);

  it('pd rules: each broken rule is a DnnlError naming the parameter', async () => {
    const eng = await engineFor({ threads: 1, kernels: 'simd128' });
    const logits = md([4, 8]);
    const make = (o: Partial<RoutingOptions>, src = logits) => () => new moe.routing.PrimitiveDesc(eng, src, { topK: 2, ...o } as RoutingOptions);
    const bad: [() => unknown, 'invalid_arguments' | 'unimplemented', string][] = [
      [make({ topK: 0 }), 'invalid_arguments', 'topK must be an integer in [1, E = 8], got 0'],
      [make({ topK: 9 }), 'invalid_arguments', 'topK must be an integer in [1, E = 8], got 9'],
      [make({ topK: 1.5 }), 'invalid_arguments', 'topK must be an integer'],
      [make({ topK: undefined }), 'invalid_arguments', 'topK must be an integer in [1, E = 8], got undefined'],
      [make({ scoring: 'relu' as 'softmax' }), 'invalid_arguments', "scoring must be 'softmax' or 'sigmoid', got 'relu'"],
      [make({ renormalize: 1 as unknown as boolean }), 'invalid_arguments', 'renormalize must be a boolean'],
      [make({ renormalizeEps: -1e-6 }), 'invalid_arguments', 'renormalizeEps must be a finite f32 number >= 0, got -0.000001'],
      [make({ renormalizeEps: Infinity }), 'invalid_arguments', 'renormalizeEps must be a finite f32 number >= 0, got Infinity'],
      [make({ routedScalingFactor: Number.NaN }), 'invalid_arguments', 'routedScalingFactor must be a finite f32 number, got NaN'],
      [make({ routedScalingFactor: Infinity }), 'invalid_arguments', 'routedScalingFactor must be a finite f32 number'],
      [make({ routedScalingFactor: 1e39 }), 'invalid_arguments', 'routedScalingFactor must be a finite f32 number, got 1e+39'],
      [make({ groupCount: 0 }), 'invalid_arguments', 'groupCount must be a positive integer, got 0'],
      [make({ groupCount: 3 }), 'invalid_arguments', 'groupCount 3 must divide the expert count E = 8'],
      [make({ groupCount: 4, kGroup: 0 }), 'invalid_arguments', 'kGroup must be an integer in [1, groupCount = 4], got 0'],
      [make({ groupCount: 4, kGroup: 5 }), 'invalid_arguments', 'kGroup must be an integer in [1, groupCount = 4], got 5'],
      [make({ topK: 3, groupCount: 4, kGroup: 1 }), 'invalid_arguments', 'topK 3 exceeds the 2 experts of the kGroup = 1 selected groups'],
      [make({ groupSelectMode: 2 as 0 }), 'invalid_arguments', 'groupSelectMode must be 0 (group max) or 1 (sum of the group\'s top 2), got 2'],
      [make({ topK: 1, groupCount: 8, kGroup: 2, groupSelectMode: 1 }), 'invalid_arguments', 'groupSelectMode 1 (sum of the group\'s top 2) needs at least 2 experts per group, got E / groupCount = 1'],
      [make({ correctionBias: 'yes' as unknown as boolean }), 'invalid_arguments', 'correctionBias must be a boolean'],
      [make({ customRoutingFunction: 3 as unknown as moe.routing.CustomRoutingFunction }), 'invalid_arguments', 'customRoutingFunction must be a function'],
      [make({ customRoutingFunction: () => ({ ids: [], weights: [] }), correctionBias: true }), 'invalid_arguments', 'customRoutingFunction cannot use correctionBias'],
      [make({ customRoutingFunction: () => ({ ids: [], weights: [] }), groupCount: 2 }), 'invalid_arguments', 'customRoutingFunction replaces the selection'],
      [make({}, md([4, 8, 2])), 'invalid_arguments', 'src (logits) must be 2D [T, E], got 3 dims'],
      [make({}, md([4, 8], 's8')), 'unimplemented', 'src (logits) data type s8 is not supported (f32, bf16, f16)'],
      [make({}, md([4, 8], 's32')), 'unimplemented', 'src (logits) data type s32 is not supported'],
      [make({}, memory.desc.grouped([4, 8], 'f32', 2, [RUNTIME_DIM_VAL, 8])), 'invalid_arguments', 'src (logits) must be a plain descriptor, got grouped'],
      [make({ topK: 1 }, md([4, 0])), 'invalid_arguments', 'src (logits) dims[1] (experts E) must be at least 1'],
      [() => new moe.routing.PrimitiveDesc(eng, [4, 8] as unknown as ReturnType<typeof md>, { topK: 1 }), 'invalid_arguments', 'src (logits) must be a memory descriptor'],
      [() => new moe.routing.PrimitiveDesc(eng, logits, null as unknown as RoutingOptions), 'invalid_arguments', 'options must be an object'],
    ];
    for (const [fn, status, fragment] of bad) expectDnnlError(fn, status, `moe.routing: ${fragment}`);
    // The boundaries themselves are accepted.
    expect(() => make({ topK: 8 })()).not.toThrow();
    expect(() => make({ topK: 4, groupCount: 4, kGroup: 2, groupSelectMode: 1 })()).not.toThrow();
    expect(() => make({ topK: 1, groupCount: 8, kGroup: 8 })()).not.toThrow();
  });

  it('queryMd answers each argument; tag.any logits resolve to row-major', async () => {
    const eng = await engineFor({ threads: 1, kernels: 'simd128' });
    const pd = new moe.routing.PrimitiveDesc(eng, memory.desc([5, 12], 'bf16', tag.any), { topK: 3, correctionBias: true });
    expect(pd.queryMd('src')!.equals(memory.desc([5, 12], 'bf16', tag.ab))).toBe(true);
    expect(pd.queryMd('topk_ids')!.equals(memory.desc([5, 3], 's32', tag.ab))).toBe(true);
    expect(pd.queryMd('topk_weights')!.equals(memory.desc([5, 3], 'f32', tag.ab))).toBe(true);
    expect(pd.queryMd('correction_bias')!.equals(memory.desc([12], 'f32', tag.a))).toBe(true);
    expect(new moe.routing.PrimitiveDesc(eng, md([5, 12]), { topK: 3 }).queryMd('correction_bias')).toBeUndefined();
  });

  it('execute rules: missing, mismatched, overlapping or foreign arguments', async () => {
    const eng = await engineFor({ threads: 1, kernels: 'simd128' });
    const other = await engineFor({ threads: 1, kernels: 'none' });
    const strm = new Stream(eng);
    const T = 4, E = 8, k = 2;
    const pd = new moe.routing.PrimitiveDesc(eng, md([T, E]), { topK: k, correctionBias: true });
    const prim = new moe.routing.Primitive(pd);
    const src = Memory.create(md([T, E]), eng).write(new Array(T * E).fill(0));
    const ids = Memory.create(md([T, k], 's32'), eng);
    const w = Memory.create(md([T, k]), eng);
    const bias = Memory.create(md([E]), eng).write(new Array(E).fill(0));
    const full = { [ARG.SRC]: src, [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.MOE_CORRECTION_BIAS]: bias };
    const without = (id: number): Record<number, Memory> => Object.fromEntries(Object.entries(full).filter(([key]) => Number(key) !== id));
    const exec = (args: Record<number, Memory | undefined>) => () => prim.execute(strm, args);
    const F = 'moe.routing.execute: ';
    expectDnnlError(exec(without(ARG.SRC)), 'invalid_arguments', `${F}missing argument ARG.SRC`);
    expectDnnlError(exec(without(ARG.MOE_TOPK_IDS)), 'invalid_arguments', `${F}missing argument ARG.MOE_TOPK_IDS`);
    expectDnnlError(exec(without(ARG.MOE_TOPK_WEIGHTS)), 'invalid_arguments', `${F}missing argument ARG.MOE_TOPK_WEIGHTS`);
    expectDnnlError(exec(without(ARG.MOE_CORRECTION_BIAS)), 'invalid_arguments', `${F}missing argument ARG.MOE_CORRECTION_BIAS`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_IDS]: Memory.create(md([T, k + 1], 's32'), eng) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS descriptor`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_IDS]: Memory.create(md([T, k], 'f32'), eng) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS descriptor f32`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_WEIGHTS]: Memory.create(md([T, k], 's32'), eng) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_WEIGHTS descriptor s32`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_WEIGHTS]: Memory.create(md([T, k], 'bf16'), eng) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_WEIGHTS descriptor bf16`);
    expectDnnlError(exec({ ...full, [ARG.SRC]: Memory.create(md([T, E], 'f16'), eng) }), 'invalid_arguments', `${F}ARG.SRC descriptor f16`);
    expectDnnlError(exec({ ...full, [ARG.MOE_CORRECTION_BIAS]: Memory.create(md([E + 1]), eng) }), 'invalid_arguments', `${F}ARG.MOE_CORRECTION_BIAS descriptor`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_WEIGHTS]: Memory.create(md([T, k]), eng, ids.handles[0]) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS values overlap ARG.MOE_TOPK_WEIGHTS values`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_WEIGHTS]: Memory.create(md([T, k]), eng, src.handles[0]) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_WEIGHTS values overlap ARG.SRC values`);
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_IDS]: Memory.create(md([T, k], 's32'), eng, bias.handles[0]) }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS values overlap ARG.MOE_CORRECTION_BIAS values`);
    expectDnnlError(exec({ ...full, [ARG.SRC]: Memory.create(md([T, E]), other) }), 'invalid_arguments', `${F}ARG.SRC belongs to another engine`);
    expectDnnlError(() => prim.execute(new Stream(other), full), 'invalid_arguments', `${F}stream belongs to another engine`);
    const freed = Memory.create(md([T, k], 's32'), eng);
    freed.free();
    expectDnnlError(exec({ ...full, [ARG.MOE_TOPK_IDS]: freed }), 'invalid_arguments', `${F}ARG.MOE_TOPK_IDS was freed`);
    const plainPd = new moe.routing.PrimitiveDesc(eng, md([T, E]), { topK: k });
    expectDnnlError(() => new moe.routing.Primitive(plainPd).execute(strm, full), 'invalid_arguments', `${F}ARG.MOE_CORRECTION_BIAS was given but the pd was created without correctionBias`);
    // Nothing above was enqueued: the valid call still runs.
    (ids.values as Int32Array).fill(-1);
    prim.execute(strm, full);
    await strm.wait();
    expect(Array.from(ids.values)).toEqual([0, 1, 0, 1, 0, 1, 0, 1]);
  });
});
