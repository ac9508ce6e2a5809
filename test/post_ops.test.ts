import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, PostOps, PrimitiveAttr, Stream, algorithm, type EltwiseAlg } from '../src/index.js';
import { eltwiseScalar } from '../src/attr/eltwise.js';
import { ENGINE_CONFIGS, expectDnnlError, expectMatchesReference, runDense, runGroupedK, runGroupedM } from './helpers.js';
import type { RefPostOp } from './reference.js';

describe('PostOps / PrimitiveAttr', () => {
  it('builds an ordered chain and renders it', () => {
    const attr = new PrimitiveAttr();
    expect(attr.isDefault).toBe(true);
    expect(attr.toString()).toBe('');
    attr.postOps.appendSum(0.5).appendEltwise(algorithm.eltwise_relu, 0.1).appendEltwise(algorithm.eltwise_linear, 2, -1);
    expect(attr.isDefault).toBe(false);
    expect(attr.postOps.length).toBe(3);
    expect(attr.postOps.entries).toEqual([
      { kind: 'sum', scale: 0.5 },
      { kind: 'eltwise', alg: 'eltwise_relu', alpha: 0.1, beta: 0 },
      { kind: 'eltwise', alg: 'eltwise_linear', alpha: 2, beta: -1 },
    ]);
    expect(attr.toString()).toBe('attr-post-ops:sum:0.5+eltwise_relu:0.1:0+eltwise_linear:2:-1');
  });

  it('setPostOps replaces the chain', () => {
    const ops = new PostOps().appendEltwise(algorithm.eltwise_abs);
    const attr = new PrimitiveAttr().setPostOps(ops);
    expect(attr.postOps).toBe(ops);
    expect(attr.postOps.entries[0]).toEqual({ kind: 'eltwise', alg: 'eltwise_abs', alpha: 0, beta: 0 });
  });

  it('appendSum defaults to scale 1', () => {
    expect(new PostOps().appendSum().entries).toEqual([{ kind: 'sum', scale: 1 }]);
  });

  it('rule: unknown eltwise algorithm', () => {
    expectDnnlError(() => new PostOps().appendEltwise('eltwise_foo' as EltwiseAlg), 'invalid_arguments', "post_ops.appendEltwise: unknown algorithm 'eltwise_foo'");
  });

  it('rule: eltwise alpha and beta must be finite', () => {
    expectDnnlError(() => new PostOps().appendEltwise(algorithm.eltwise_relu, Number.NaN), 'invalid_arguments', 'post_ops.appendEltwise: alpha and beta must be finite');
    expectDnnlError(() => new PostOps().appendEltwise(algorithm.eltwise_linear, 1, Infinity), 'invalid_arguments', 'alpha and beta must be finite');
  });

  it('rule: soft_relu alpha must not be 0 (it divides by alpha)', () => {
    expectDnnlError(() => new PostOps().appendEltwise(algorithm.eltwise_soft_relu), 'invalid_arguments', 'post_ops.appendEltwise: eltwise_soft_relu divides by alpha, which must not be 0');
    expect(new PostOps().appendEltwise(algorithm.eltwise_soft_relu, 0.5).entries).toEqual([{ kind: 'eltwise', alg: 'eltwise_soft_relu', alpha: 0.5, beta: 0 }]);
  });

  it('eltwise_round rounds halves to even (the reference engine\'s scalar semantics)', () => {
    expect([0.5, 1.5, 2.5, -1.5, -2.5, 2.4, -2.6].map((x) => eltwiseScalar('eltwise_round', x, 0, 0))).toEqual([0, 2, 2, -2, -2, 2, -3]);
  });

  it('rule: sum scale must be finite', () => {
    expectDnnlError(() => new PostOps().appendSum(-Infinity), 'invalid_arguments', 'post_ops.appendSum: scale must be finite');
  });

  it('rule: at most one sum post-op', () => {
    expectDnnlError(() => new PostOps().appendSum(1).appendEltwise(algorithm.eltwise_relu).appendSum(2), 'invalid_arguments', 'post_ops.appendSum: at most one sum post-op');
  });
});

describe.each(ENGINE_CONFIGS)('post-ops numerics [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const chains: ReadonlyArray<readonly [string, readonly RefPostOp[]]> = [
    ['relu', [{ kind: 'relu', alpha: 0 }]],
    ['leaky relu', [{ kind: 'relu', alpha: -0.3 }]],
    ['linear', [{ kind: 'linear', alpha: 0.75, beta: 0.125 }]],
    ['clip', [{ kind: 'clip', alpha: -0.5, beta: 0.25 }]],
    ['abs', [{ kind: 'abs' }]],
    ['square', [{ kind: 'square' }]],
    ['tanh', [{ kind: 'tanh' }]],
    ['logistic', [{ kind: 'logistic' }]],
    ['exp', [{ kind: 'exp' }]],
    ['sum first, then relu', [{ kind: 'sum', scale: 0.5 }, { kind: 'relu', alpha: 0 }]],
    ['relu, then sum (sum not first)', [{ kind: 'relu', alpha: 0 }, { kind: 'sum', scale: -1 }]],
    ['elu (alpha 1.5)', [{ kind: 'elu', alpha: 1.5 }]],
    ['elu tails (x20)', [{ kind: 'linear', alpha: 20, beta: 0 }, { kind: 'elu', alpha: 0.5 }]],
    ['sqrt of |x| + 0.5', [{ kind: 'abs' }, { kind: 'linear', alpha: 1, beta: 0.5 }, { kind: 'sqrt' }]],
    ['log of |x| + 0.25', [{ kind: 'abs' }, { kind: 'linear', alpha: 1, beta: 0.25 }, { kind: 'log' }]],
    ['soft_relu (alpha 1)', [{ kind: 'soft_relu', alpha: 1 }]],
    ['soft_relu (alpha 2) tails (x20)', [{ kind: 'linear', alpha: 20, beta: 0 }, { kind: 'soft_relu', alpha: 2 }]],
    ['clip_v2', [{ kind: 'clip_v2', alpha: -0.5, beta: 0.25 }]],
    ['pow (alpha 0.5, beta 3)', [{ kind: 'pow', alpha: 0.5, beta: 3 }]],
    ['pow (beta 1.5) of |x| + 0.5', [{ kind: 'abs' }, { kind: 'linear', alpha: 1, beta: 0.5 }, { kind: 'pow', alpha: 1, beta: 1.5 }]],
    ['round (x4)', [{ kind: 'linear', alpha: 4, beta: 0 }, { kind: 'round' }]],
    ['mish', [{ kind: 'mish' }]],
    ['mish tails (x20)', [{ kind: 'linear', alpha: 20, beta: 0 }, { kind: 'mish' }]],
    ['hardswish (1/6, 1/2) (x4)', [{ kind: 'linear', alpha: 4, beta: 0 }, { kind: 'hardswish', alpha: 1 / 6, beta: 0.5 }]],
    ['hardsigmoid (0.2, 0.5) (x4)', [{ kind: 'linear', alpha: 4, beta: 0 }, { kind: 'hardsigmoid', alpha: 0.2, beta: 0.5 }]],
    ['five eltwise in a row', [{ kind: 'abs' }, { kind: 'linear', alpha: -1, beta: 0 }, { kind: 'relu', alpha: 0.5 }, { kind: 'clip', alpha: -0.2, beta: 1 }, { kind: 'square' }]],
  ];

  it.each(chains)('grouped M with bias: %s', async (_n, postOps) => {
    expectMatchesReference(await runGroupedM(eng, strm, { G: 5, K: 9, N: 11, sizes: [3, 0, 7, 1, 6], totalM: 20, bias: [5, 11], postOps }));
  });

  it.each(chains)('grouped K: %s', async (_n, postOps) => {
    expectMatchesReference(await runGroupedK(eng, strm, { G: 4, M: 3, N: 10, sizes: [5, 0, 2, 6], postOps }));
  });

  it.each(chains)('dense batched: %s', async (_n, postOps) => {
    expectMatchesReference(await runDense(eng, strm, { srcDims: [2, 5, 9], weiDims: [2, 9, 10], bias: [1, 1, 10], postOps }));
  });
});
