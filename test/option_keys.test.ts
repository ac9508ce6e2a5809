/**
 * Unknown keys in every public options object are refused with the valid keys (a misspelt option,
 * `routing: { renormalise: true }`, was silently ignored and its default used).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Engine, Memory, PostOps, dt, encodeArray, glu_backward, memory, moe, quant, tag,
} from '../src/index.js';
import { checkOptionKeys, optionKeys } from '../src/common/option_keys.js';
import { expectDnnlError } from './helpers.js';

let eng: Engine;
beforeAll(async () => {
  eng = await Engine.create({ threads: 1 });
});
afterAll(() => eng.release());

/** Casts an options object with an extra key past the type checker, as a JavaScript caller would pass it. */
function withKey<T>(o: T, key: string, value: unknown = true): T {
  return { ...o, [key]: value } as T;
}

const layerBase: moe.layer.LayerConfig = { tokens: 4, hidden: 8, intermediate: 4, experts: 4, topK: 2 };

describe('checkOptionKeys', () => {
  it('lists the valid keys and suggests the nearest one for a typo', () => {
    const keys = optionKeys<{ renormalize?: boolean; scoring?: string }>({ renormalize: true, scoring: true });
    expect(keys).toEqual(['renormalize', 'scoring']);
    expectDnnlError(() => checkOptionKeys('here', { renormalise: true }, keys), 'invalid_arguments', "here: unknown option 'renormalise' (did you mean 'renormalize'?); valid options: renormalize, scoring");
    expectDnnlError(() => checkOptionKeys('here', { colour: 1 }, keys), 'invalid_arguments', "here: unknown option 'colour'; valid options: renormalize, scoring");
    expect(() => checkOptionKeys('here', { scoring: 'x' }, keys)).not.toThrow();
    expect(() => checkOptionKeys('here', undefined, keys)).not.toThrow();
  });
});

describe('every public options object refuses unknown keys', () => {
  it('Engine.create', async () => {
    await expect(Engine.create(withKey({ threads: 1 }, 'thread', 2))).rejects.toThrow("Engine.create: unknown option 'thread' (did you mean 'threads'?); valid options: kind, threads, kernels, initialBytes, maxBytes, startTimeoutMs");
  });

  it('Memory.create', () => {
    expectDnnlError(() => Memory.create(memory.desc([4], dt.f32, tag.a), eng, undefined, withKey({}, 'capacity', 16)), 'invalid_arguments', "Memory.create: unknown option 'capacity'");
  });

  it('moe.routing', () => {
    const logits = memory.desc([4, 4], dt.f32, tag.ab);
    expectDnnlError(() => new moe.routing.PrimitiveDesc(eng, logits, withKey({ topK: 2 }, 'renormalise')), 'invalid_arguments', "moe.routing: unknown option 'renormalise' (did you mean 'renormalize'?); valid options: topK, scoring, renormalize,");
  });

  it('moe.dispatch', () => {
    expectDnnlError(() => new moe.dispatch.PrimitiveDesc(eng, withKey({ tokens: 4, topK: 2, experts: 4 }, 'alignBlock', 16)), 'invalid_arguments', "moe.dispatch: unknown option 'alignBlock' (did you mean 'alignBlockSize'?); valid options: tokens, topK, experts, localExperts, expertMap, hidden, alignBlockSize, format, maxTokens");
  });

  it('moe.combine', () => {
    const src = memory.desc([8, 8], dt.f32, tag.ab), dst = memory.desc([4, 8], dt.f32, tag.ab);
    expectDnnlError(() => new moe.combine.PrimitiveDesc(eng, withKey({ tokens: 4, topK: 2, src, dst }, 'weight', false)), 'invalid_arguments', "moe.combine: unknown option 'weight' (did you mean 'weighted'?)");
  });

  it('moe.activation glu', () => {
    const src = memory.desc([4, 8], dt.f32, tag.ab), dst = memory.desc([4, 4], dt.f32, tag.ab);
    expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, src, dst, withKey({ alg: 'glu_swiglu' as const }, 'beta', 1)), 'invalid_arguments', "moe.activation: glu: unknown option 'beta'; valid options: alg, layout, alpha, limit");
  });

  it('moe.layer config and every nested object', () => {
    const cases: [moe.layer.LayerConfig, string][] = [
      [withKey(layerBase, 'topk', 2), "moe.layer: unknown option 'topk' (did you mean 'topK'?)"],
      [{ ...layerBase, routing: withKey({}, 'renormalise') }, "moe.layer: routing: unknown option 'renormalise' (did you mean 'renormalize'?); valid options: scoring, renormalize"],
      [{ ...layerBase, glu: withKey({ alg: 'glu_swiglu' as const }, 'limits', 7) }, "moe.layer: glu: unknown option 'limits' (did you mean 'limit'?)"],
      [{ ...layerBase, weights: withKey({ w13: memory.desc([4, 8, 8], dt.f32, tag.any), w2: memory.desc([4, 4, 8], dt.f32, tag.any) }, 'w3', 1) }, "moe.layer: weights: unknown option 'w3' (did you mean 'w13'?); valid options: w13, w2"],
      [{ ...layerBase, weightScales: withKey({}, 'down', 1) }, "moe.layer: weightScales: unknown option 'down'; valid options: w13, w2"],
      [{ ...layerBase, weightScales: { w13: withKey({ mask: 5 }, 'group', [1]) } }, "moe.layer: weightScales.w13: unknown option 'group' (did you mean 'groups'?)"],
      [{ ...layerBase, sharedExpert: withKey({ intermediate: 4 }, 'gated') }, "moe.layer: sharedExpert: unknown option 'gated' (did you mean 'gate'?); valid options: intermediate, gate, glu, weights, weightScales"],
    ];
    for (const [c, msg] of cases) expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, c), 'invalid_arguments', msg);
  });

  it('moe.ExpertParallelRank config', () => {
    const ep: moe.ExpertParallelConfig = { ...layerBase, rank: 0, worldSize: 2 };
    const a2a = (send: readonly Uint8Array[]): Promise<Uint8Array[]> => Promise.resolve([...send]);
    expectDnnlError(() => new moe.ExpertParallelRank(eng, withKey(ep, 'world', 2), a2a), 'invalid_arguments', "moe.ExpertParallelRank: unknown option 'world'");
    expectDnnlError(() => new moe.ExpertParallelRank(eng, { ...ep, routing: withKey({}, 'renormalise') }, a2a), 'invalid_arguments', "moe.ExpertParallelRank: routing: unknown option 'renormalise'");
  });

  it('glu_backward options and the glu_backward post-op options', () => {
    const h = memory.desc([4, 8], dt.f32, tag.ab), d = memory.desc([4, 4], dt.f32, tag.ab);
    expectDnnlError(() => new glu_backward.PrimitiveDesc(eng, h, d, h, withKey({ alg: 'glu_swiglu', layout: 'halves', alpha: 1 }, 'probability')), 'invalid_arguments', "glu_backward: unknown option 'probability'; valid options: alg, layout, alpha, limit, prob");
    expectDnnlError(() => new PostOps().appendGluBackward('glu_swiglu', 'halves', undefined, undefined, withKey({}, 'srcDatatype', dt.bf16)), 'invalid_arguments', "post_ops.appendGluBackward: unknown option 'srcDatatype' (did you mean 'srcDataType'?)");
  });

  it('quant helpers and encodeArray', () => {
    expectDnnlError(() => quant.perTokenInt8([1, 2], [1, 2], withKey({}, 'symmetrical')), 'invalid_arguments', "quant.perTokenInt8: unknown option 'symmetrical' (did you mean 'symmetric'?); valid options: symmetric");
    expectDnnlError(() => encodeArray('f8_e4m3', [1], withKey({}, 'saturating')), 'invalid_arguments', "encodeArray: unknown option 'saturating'");
  });
});
