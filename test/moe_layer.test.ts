/**
 * The whole MoE layer (moe.layer): against a float64 reference given the layer's own routing, every
 * stage variant bit-identical to the others (gather vs permute, fused scatter vs weight-and-reduce),
 * threads 1/2/3 bit-identical, bias, shared expert, w8a8, expert parallel with 2 and 4 simulated ranks
 * equal to one rank bit for bit, argument errors.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, MemoryDesc, Stream, dt, memory, moe, reorder, tag, type DataType, type EngineOptions } from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { data, refMoeLayer, type Data, type Shape } from './moe_layer_reference.js';
import { mulberry32, randomF32 } from './workloads.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));
async function engine(o: EngineOptions): Promise<Engine> {
  const e = await Engine.create(o);
  engines.push(e);
  return e;
}


function mem(eng: Engine, dims: number[], v: ArrayLike<number>, t: DataType = dt.f32): Memory {
  const m = Memory.create(memory.desc(dims, t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc), eng);
  m.write(Float64Array.from(v));
  return m;
}

type Variant = Pick<moe.layer.LayerConfig, 'gemm1' | 'combine' | 'bias' | 'sharedExpert' | 'routingWeight' | 'dataType'> & { packed?: boolean };

/** `ids`: run the route stage, then replace its top-k ids (e.g. with repeated experts) before the other stages. */
async function runLayer(eng: Engine, s: Shape, d: Data, v: Variant = {}, ids?: Int32Array): Promise<{ out: Float32Array; ids: Int32Array; w: Float32Array; layer: moe.layer.Primitive }> {
  const strm = new Stream(eng);
  const { packed = true, ...layerOptions } = v;
  const weights = packed ? undefined : { w13: memory.desc([s.E, s.K, 2 * s.I], dt.f32, tag.abc), w2: memory.desc([s.E, s.I, s.K], dt.f32, tag.abc) };
  const pd = new moe.layer.PrimitiveDesc(eng, { tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, routing: { renormalize: true }, ...layerOptions, weights });
  const layer = new moe.layer.Primitive(pd);
  const w13p = mem(eng, [s.E, s.K, 2 * s.I], d.w13), w2p = mem(eng, [s.E, s.I, s.K], d.w2);
  let w13 = w13p, w2 = w2p;
  if (packed) {
    w13 = Memory.create(pd.queryMd('w13')!, eng);
    w2 = Memory.create(pd.queryMd('w2')!, eng);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, w13p.desc, w13.desc)).execute(strm, { [ARG.FROM]: w13p, [ARG.TO]: w13 });
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, w2p.desc, w2.desc)).execute(strm, { [ARG.FROM]: w2p, [ARG.TO]: w2 });
  }
  const out = Memory.create(pd.queryMd('dst')!, eng);
  const args: Record<number, Memory> = {
    [ARG.SRC]: mem(eng, [s.T, s.K], d.hidden, v.dataType), [ARG.MOE_ROUTER_LOGITS]: mem(eng, [s.T, s.E], d.logits, v.dataType), [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: out,
  };
  if (v.bias) {
    args[ARG.BIAS] = mem(eng, [s.E, 2 * s.I], d.b13);
    args[ARG.MOE_W2_BIAS] = mem(eng, [s.E, s.K], d.b2);
  }
  if (v.sharedExpert) {
    const Is = v.sharedExpert.intermediate;
    args[ARG.MOE_SHARED_W13] = mem(eng, [s.K, 2 * Is], d.w13.subarray(0, s.K * 2 * Is));
    args[ARG.MOE_SHARED_W2] = mem(eng, [Is, s.K], d.w2.subarray(0, Is * s.K));
  }
  if (ids) {
    layer.stage('route').execute(strm, args);
    await strm.wait();
    (layer.workspace.topkIds.values as Int32Array).set(ids);
    for (const st of layer.stages.slice(1)) st.execute(strm, args);
  } else layer.execute(strm, args);
  await strm.wait();
  return { out: Float32Array.from(out.read()), ids: Int32Array.from(layer.workspace.topkIds.values as Int32Array), w: Float32Array.from(layer.workspace.topkWeights.values as Float32Array), layer };
}

function checkRef(s: Shape, d: Data, r: { out: Float32Array; ids: Int32Array; w: Float32Array }, v: Variant = {}, repeats = false): void {
  const Is = v.sharedExpert?.intermediate;
  const ref = refMoeLayer({
    T: s.T, K: s.K, I: s.I, k: s.k, hidden: d.hidden, ids: r.ids, weights: r.w, w13: d.w13, w2: d.w2,
    b13: v.bias ? d.b13 : undefined, b2: v.bias ? d.b2 : undefined, glu: { alg: 'glu_swiglu', layout: 'halves' },
    shared: Is ? { Is, w13: d.w13.subarray(0, s.K * 2 * Is), w2: d.w2.subarray(0, Is * s.K) } : undefined,
    routingWeight: v.routingWeight,
  });
  let worst = 0;
  for (let i = 0; i < ref.value.length; i++) worst = Math.max(worst, Math.abs(r.out[i] - ref.value[i]) / (ref.mag[i] + 1e-30));
  expect(worst).toBeLessThan(2e-5);
  // routing sanity: k distinct ids per token in range, weights renormalized
  for (let t = 0; t < s.T; t++) {
    const ids = Array.from(r.ids.subarray(t * s.k, t * s.k + s.k));
    if (!repeats) expect(new Set(ids).size).toBe(s.k);
    ids.forEach((e) => expect(e >= 0 && e < s.E).toBe(true));
    expect(Math.abs(r.w.subarray(t * s.k, t * s.k + s.k).reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-5);
  }
}

const SHAPES: readonly (Shape & { name: string; skew?: boolean })[] = [
  { name: 'E=8 k=2, tails', T: 37, E: 8, k: 2, K: 70, I: 44 },
  { name: 'T=1', T: 1, E: 6, k: 3, K: 33, I: 20 },
  { name: 'k = E', T: 9, E: 3, k: 3, K: 24, I: 16 },
  { name: 'E=1', T: 11, E: 1, k: 1, K: 40, I: 24 },
  { name: 'all tokens to one expert first', T: 30, E: 16, k: 2, K: 64, I: 40, skew: true },
];

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['relaxed 2T', { threads: 2, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.layer [%s]', (_n, opts) => {
  for (const s of SHAPES) {
    it(`matches float64 given its routing; gather/permute and fused scatter/weight-and-reduce bit-identical (${s.name})`, async () => {
      const eng = await engine(opts);
      const d = data(s, 17, s.skew);
      const base = await runLayer(eng, s, d, { packed: opts.kernels !== 'none' });
      checkRef(s, d, base);
      for (const v of [{ gemm1: 'permute' }, { combine: 'weight_and_reduce' }, { gemm1: 'permute', combine: 'weight_and_reduce' }] as const) {
        const r = await runLayer(eng, s, d, { ...v, packed: opts.kernels !== 'none' });
        expect(Buffer.from(r.out.buffer).equals(Buffer.from(base.out.buffer))).toBe(true);
      }
    });
  }
  it("routingWeight 'input' (Llama-4: the expert runs on x * w, the weight passes through the GLU), top-1 and top-2, both combines", async () => {
    const eng = await engine(opts);
    for (const s of [SHAPES[0], SHAPES[3], SHAPES[1]]) {
      const d = data(s, 29);
      for (const combine of ['fused_scatter', 'weight_and_reduce'] as const) {
        const v: Variant = { routingWeight: 'input', combine, bias: true, packed: opts.kernels !== 'none' };
        const r = await runLayer(eng, s, d, v);
        expect(r.layer.stages.map((x) => x.name)).toContain('weight_input');
        checkRef(s, d, r, v);
      }
    }
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { tokens: 4, hidden: 8, intermediate: 4, experts: 2, topK: 1, routingWeight: 'input', gemm1: 'gather' }), 'invalid_arguments', "routingWeight 'input' scales the rows of the permuted copy");
  });

  it('bias and a shared expert', async () => {
    const eng = await engine(opts);
    const s = SHAPES[0];
    const d = data(s, 23);
    const v: Variant = { bias: true, sharedExpert: { intermediate: 24 }, packed: opts.kernels !== 'none' };
    checkRef(s, d, await runLayer(eng, s, d, v), v);
  });
});

describe.each([
  ['simd128 2T', { threads: 2, kernels: 'simd128' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.layer with an expert repeated in a token\'s slots [%s]', (_n, opts) => {
  it('one routed row per slot, summed: float64 reference, every stage variant bit-identical', async () => {
    const eng = await engine(opts);
    for (const s of [{ T: 21, E: 5, k: 3, K: 40, I: 20 }, { T: 6, E: 2, k: 2, K: 33, I: 16 }]) {
      const d = data(s, 41);
      const rng = mulberry32(s.T);
      const ids = Int32Array.from({ length: s.T * s.k }, () => Math.floor(rng() * s.E));
      for (let t = 0; t < s.T; t += 3) ids.fill(t % s.E, t * s.k, (t + 1) * s.k); // every third token: one expert in all slots
      const packed = opts.kernels !== 'none';
      const base = await runLayer(eng, s, d, { packed }, ids);
      expect(Array.from(base.ids)).toEqual(Array.from(ids));
      checkRef(s, d, base, {}, true);
      for (const v of [{ gemm1: 'permute' }, { combine: 'weight_and_reduce' }, { gemm1: 'permute', combine: 'weight_and_reduce' }] as const) {
        const r = await runLayer(eng, s, d, { ...v, packed }, ids);
        expect(Buffer.from(r.out.buffer).equals(Buffer.from(base.out.buffer)), JSON.stringify(v)).toBe(true);
      }
    }
  });
});

describe('moe.layer with T = 0 tokens', () => {
  it('an empty batch is a no-op in every variant (threads 2 and the reference)', async () => {
    for (const opts of [{ threads: 2, kernels: 'simd128' }, { threads: 1, kernels: 'none' }] as const) {
      const eng = await engine(opts);
      const strm = new Stream(eng);
      const K = 8, I = 4, E = 3, k = 2;
      const plainW = (t: DataType): moe.layer.LayerConfig['weights'] => ({ w13: memory.desc([E, K, 2 * I], t, tag.abc), w2: memory.desc([E, I, K], t, tag.abc) });
      const variants: Partial<moe.layer.LayerConfig>[] = [
        { weights: plainW(dt.f32) }, { weights: plainW(dt.f32), gemm1: 'permute', combine: 'weight_and_reduce' },
        { weights: plainW(dt.f32), bias: true, sharedExpert: { intermediate: 4 } }, { localExperts: 2, weights: { w13: memory.desc([2, K, 2 * I], dt.f32, tag.abc), w2: memory.desc([2, I, K], dt.f32, tag.abc) } },
        { weights: plainW(dt.s8), quant: 'w8a8_dynamic', weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } }, { propKind: 'forward_training' },
        {}, // tag.any weights, packed by the reorder
      ];
      for (const v of variants) {
        const pd = new moe.layer.PrimitiveDesc(eng, { tokens: 0, hidden: K, intermediate: I, experts: E, topK: k, ...v });
        const layer = new moe.layer.Primitive(pd);
        const m = (what: string): Memory => Memory.create(pd.queryMd(what)!, eng);
        const args: Record<number, Memory> = { [ARG.SRC]: m('hidden'), [ARG.MOE_ROUTER_LOGITS]: m('logits'), [ARG.WEIGHTS]: m('w13'), [ARG.WEIGHTS_1]: m('w2'), [ARG.DST]: m('dst') };
        if (v.bias) Object.assign(args, { [ARG.BIAS]: m('w13_bias'), [ARG.MOE_W2_BIAS]: m('w2_bias') });
        if (v.sharedExpert) Object.assign(args, { [ARG.MOE_SHARED_W13]: m('shared_w13'), [ARG.MOE_SHARED_W2]: m('shared_w2') });
        if (v.localExperts) args[ARG.MOE_EXPERT_MAP] = m('expert_map');
        if (v.quant) Object.assign(args, { [ARG.ATTR_SCALES | ARG.WEIGHTS]: m('w13_scales'), [ARG.ATTR_SCALES | ARG.WEIGHTS_1]: m('w2_scales') });
        if (pd.queryMd('w13')!.format === 'packed') {
          for (const [id, dims] of [[ARG.WEIGHTS, [E, K, 2 * I]], [ARG.WEIGHTS_1, [E, I, K]]] as const) {
            const user = Memory.create(memory.desc([...dims], dt.f32, tag.abc), eng);
            new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, args[id].desc)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: args[id] });
          }
        }
        const w13 = Array.from(args[ARG.WEIGHTS].bytes());
        layer.execute(strm, args);
        await strm.wait();
        expect(Array.from(args[ARG.WEIGHTS].bytes()), JSON.stringify(v)).toEqual(w13);
        expect(args[ARG.DST].elementCount).toBe(0);
      }
    }
  });
});

describe('moe.layer determinism and expert parallel', () => {
  it('threads 1, 2, 3 give the same bits', async () => {
    const s = { T: 45, E: 8, k: 2, K: 96, I: 72 };
    const d = data(s, 31);
    const outs: Float32Array[] = [];
    for (const threads of [1, 2, 3]) outs.push((await runLayer(await engine({ threads, kernels: 'simd128' }), s, d)).out);
    expect(Buffer.from(outs[1].buffer).equals(Buffer.from(outs[0].buffer))).toBe(true);
    expect(Buffer.from(outs[2].buffer).equals(Buffer.from(outs[0].buffer))).toBe(true);
  });

  for (const [P, adt] of [[2, dt.f32], [4, dt.f32], [2, dt.bf16], [3, dt.f16]] as const) {
    it(`${P} simulated ranks (one engine each, JS all-to-all, ${adt} hidden / dst) equal one rank bit for bit`, async () => {
      const s = { T: 24, E: 12, k: 2, K: 48, I: 40 };
      const d = data(s, 41);
      const single = await runLayer(await engine({ threads: 1, kernels: 'simd128' }), s, d, { packed: false, dataType: adt });
      // Tokens split over the ranks; each rank holds E / P experts.
      const G = s.E / P, Tr = s.T / P;
      const mailbox: Uint8Array[][][] = []; // [exchange][to][from]
      let exchange = 0;
      const pending: ((v: Uint8Array[]) => void)[][] = [];
      const makeA2A = (rank: number): moe.AllToAll => {
        let mine = 0;
        return (send) => {
          const ex = mine++;
          mailbox[ex] ??= Array.from({ length: P }, () => new Array<Uint8Array>(P));
          pending[ex] ??= [];
          // Framed at an odd offset, as a transport may deliver it: the rank must not assume alignment.
          send.forEach((b, to) => { const f = new Uint8Array(b.byteLength + 1); f.set(b, 1); mailbox[ex][to][rank] = f.subarray(1); });
          return new Promise((resolve) => {
            pending[ex][rank] = resolve;
            if (pending[ex].filter(Boolean).length === P) {
              exchange = Math.max(exchange, ex + 1);
              pending[ex].forEach((res, r) => res(mailbox[ex][r]));
            }
          });
        };
      };
      const outs: Float32Array[] = new Array(P);
      await Promise.all(Array.from({ length: P }, async (_, rank) => {
        const eng = await engine({ threads: 1, kernels: 'simd128' });
        const strm = new Stream(eng);
        const ep = new moe.ExpertParallelRank(eng, { rank, worldSize: P, tokens: Tr, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, routing: { renormalize: true }, dataType: adt }, makeA2A(rank));
        const out = mem(eng, [Tr, s.K], new Float64Array(Tr * s.K), adt);
        await ep.forward(strm, {
          [ARG.SRC]: mem(eng, [Tr, s.K], d.hidden.subarray(rank * Tr * s.K, (rank + 1) * Tr * s.K), adt),
          [ARG.MOE_ROUTER_LOGITS]: mem(eng, [Tr, s.E], d.logits.subarray(rank * Tr * s.E, (rank + 1) * Tr * s.E), adt),
          [ARG.WEIGHTS]: mem(eng, [G, s.K, 2 * s.I], d.w13.subarray(rank * G * s.K * 2 * s.I, (rank + 1) * G * s.K * 2 * s.I)),
          [ARG.WEIGHTS_1]: mem(eng, [G, s.I, s.K], d.w2.subarray(rank * G * s.I * s.K, (rank + 1) * G * s.I * s.K)),
          [ARG.DST]: out,
        });
        outs[rank] = Float32Array.from(out.read());
      }));
      const joined = new Float32Array(s.T * s.K);
      outs.forEach((o, r) => joined.set(o, r * Tr * s.K));
      expect(exchange).toBe(2);
      expect(Buffer.from(joined.buffer).equals(Buffer.from(single.out.buffer))).toBe(true);
    });
  }

  it('expert parallel: what a rank cannot run is refused at construction, a wrong argument before the first exchange', async () => {
    const eng = await engine({ threads: 1, kernels: 'simd128' });
    const base = { rank: 0, worldSize: 2, tokens: 2, hidden: 8, intermediate: 4, experts: 4, topK: 2 };
    let exchanges = 0;
    const a2a: moe.AllToAll = async (send) => { exchanges++; return send.map((b) => b.slice()); };
    expectDnnlError(() => new moe.ExpertParallelRank(eng, { ...base, sharedExpert: { intermediate: 4 } }, a2a), 'unimplemented', 'moe.ExpertParallelRank: a shared expert is not implemented here');
    expectDnnlError(() => new moe.ExpertParallelRank(eng, { ...base, dynamicQuantization: 's8' }, a2a), 'unimplemented', "moe.ExpertParallelRank: dynamicQuantization 's8' is not implemented here");
    const ep = new moe.ExpertParallelRank(eng, { ...base, worldSize: 1 }, a2a);
    const hidden = Memory.create(memory.desc([2, 8], dt.f32, [16, 1]), eng);
    const logits = mem(eng, [2, 4], new Float64Array(8)), dst = mem(eng, [2, 8], new Float64Array(16));
    await expect(ep.forward(new Stream(eng), { [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.DST]: dst })).rejects.toThrow('moe.ExpertParallelRank.forward: ARG.SRC descriptor');
    await expect(ep.forward(new Stream(eng), { [ARG.SRC]: mem(eng, [1, 8], new Float64Array(8)), [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.DST]: dst })).rejects.toThrow('does not match the rank');
    expect(exchanges).toBe(0);
  });

  it('configuration and argument errors name the rule', async () => {
    const eng = await engine({ threads: 1, kernels: 'simd128' });
    const base = { tokens: 4, hidden: 8, intermediate: 4, experts: 4, topK: 2 };
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, topK: 5 }), 'invalid_arguments', 'topK must be an integer in [1, experts = 4]');
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, tokens: -1 }), 'invalid_arguments', 'tokens must be a non-negative integer');
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, glu: { alg: 'glu_swiglu', layout: 'blocks32' } }), 'invalid_arguments', 'blocks32 needs intermediate % 32 == 0');
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, weights: { w13: memory.desc([4, 8, 9], dt.f32, tag.abc), w2: memory.desc([4, 4, 8], dt.f32, tag.abc) } }), 'invalid_arguments', 'w13 dims [4,8,9] must be');
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, quant: 'w8a8_dynamic' }), 'invalid_arguments', 'w8a8_dynamic needs weightScales');
    const layer = new moe.layer.Primitive(new moe.layer.PrimitiveDesc(eng, base));
    expectDnnlError(() => layer.execute(new Stream(eng), {}), 'invalid_arguments', 'missing argument ARG.SRC');
    const m = (what: string): Memory => Memory.create(layer.pd.queryMd(what)!, eng);
    const all = { [ARG.SRC]: m('hidden'), [ARG.MOE_ROUTER_LOGITS]: m('logits'), [ARG.WEIGHTS]: m('w13'), [ARG.WEIGHTS_1]: m('w2'), [ARG.DST]: m('dst') };
    expect(layer.pd.queryMd('expert_map')).toBeUndefined();
    expectDnnlError(() => layer.execute(new Stream(eng), { ...all, [ARG.MOE_EXPERT_MAP]: Memory.create(memory.desc([4], dt.s32, tag.a), eng) }), 'invalid_arguments',
      'moe.layer.execute: ARG.MOE_EXPERT_MAP must not be given: the layer holds all 4 experts (a map is taken when config.localExperts < experts)');
    expectDnnlError(() => layer.stage('shared_gemm1'), 'invalid_arguments', "no stage 'shared_gemm1'");
  });

  it('errors inside the layer name moe.layer and the layer\'s own argument, not the inner primitive\'s', async () => {
    const eng = await engine({ threads: 2, kernels: 'simd128' });
    const strm = new Stream(eng);
    const E = 4, K = 8, I = 4, T = 5;
    const w = (t: DataType = dt.f32): moe.layer.LayerConfig['weights'] => ({ w13: memory.desc([2, K, 2 * I], t, tag.abc), w2: memory.desc([2, I, K], t, tag.abc) });
    const pd = new moe.layer.PrimitiveDesc(eng, { tokens: T, hidden: K, intermediate: I, experts: E, topK: 2, localExperts: 2, weights: w() });
    const layer = new moe.layer.Primitive(pd);
    const m = (what: string): Memory => Memory.create(pd.queryMd(what)!, eng);
    const args: Record<number, Memory> = {
      [ARG.SRC]: m('hidden'), [ARG.MOE_ROUTER_LOGITS]: m('logits'), [ARG.WEIGHTS]: m('w13'), [ARG.WEIGHTS_1]: m('w2'), [ARG.DST]: m('dst'), [ARG.MOE_EXPERT_MAP]: m('expert_map'),
    };
    (args[ARG.MOE_EXPERT_MAP].values as Int32Array).set([0, -1, 1, -1]);
    layer.execute(strm, args);
    await strm.wait();
    // A w2 of the wrong shape: GEMM2's weights, said as the layer's ARG.WEIGHTS_1.
    const badW2 = Memory.create(memory.desc([2, I, K + 1], dt.f32, tag.abc), eng);
    const e1 = expectDnnlError(() => layer.execute(strm, { ...args, [ARG.WEIGHTS_1]: badW2 }), 'invalid_arguments', /^invalid_arguments: moe\.layer\.execute: ARG\.WEIGHTS_1 .* \(stage gemm2\)$/);
    expect(e1.message).not.toMatch(/matmul|ARG\.WEIGHTS(?!_1)/);
    // The same through the stage alone: a missing w2 is named as the layer's.
    const { [ARG.WEIGHTS_1]: _w2, ...noW2 } = args;
    void _w2;
    expectDnnlError(() => layer.stage('gemm2').execute(strm, noW2), 'invalid_arguments', 'moe.layer.execute: missing argument ARG.WEIGHTS_1 (stage gemm2)');
    // Runtime data: a bad expert map is reported at wait() as the layer's argument.
    (args[ARG.MOE_EXPERT_MAP].values as Int32Array).set([0, 2, 1, -1]);
    layer.execute(strm, args);
    const e2 = await expectDnnlReject(strm.wait(), 'invalid_arguments', 'moe.layer.execute: ARG.MOE_EXPERT_MAP[1] = 2 is out of range [-1, local experts = 2) (stage dispatch)');
    expect(e2.message).not.toContain('moe.dispatch');
    // A configuration an inner pd refuses: the layer, the stage and its role are named.
    const e3 = expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { tokens: T, hidden: K, intermediate: I, experts: E, topK: 2, localExperts: 2, weights: w(dt.s32) }), 'unimplemented', /^unimplemented: moe\.layer: gemm1 \(hidden x w13/);
    expect(e3.message).toContain('s32');
  });
});

describe('moe.layer variants', () => {
  it('w8a8_dynamic: per-token int8 activations x int8 weights with per-column scales, close to float64', async () => {
    const eng = await engine({ threads: 2, kernels: 'simd128' });
    const strm = new Stream(eng);
    const s = { T: 21, E: 4, k: 2, K: 64, I: 48 };
    const d = data(s, 51);
    // Weights quantized per (expert, column): q = round(w / sc), sc = amax / 127.
    const quantize = (w: Float64Array, G: number, rows: number, cols: number): { q: Float64Array; sc: Float64Array; deq: Float64Array } => {
      const q = new Float64Array(w.length), sc = new Float64Array(G * cols), deq = new Float64Array(w.length);
      for (let g = 0; g < G; g++) for (let c = 0; c < cols; c++) {
        let amax = 0;
        for (let r = 0; r < rows; r++) amax = Math.max(amax, Math.abs(w[(g * rows + r) * cols + c]));
        const f = Math.fround(amax / 127 || 1);
        sc[g * cols + c] = f;
        for (let r = 0; r < rows; r++) {
          const i = (g * rows + r) * cols + c;
          q[i] = Math.round(w[i] / f);
          deq[i] = q[i] * f;
        }
      }
      return { q, sc, deq };
    };
    const q13 = quantize(d.w13, s.E, s.K, 2 * s.I), q2 = quantize(d.w2, s.E, s.I, s.K);
    const pd = new moe.layer.PrimitiveDesc(eng, { tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, routing: { renormalize: true }, quant: 'w8a8_dynamic', weightScales: { w13: { mask: 5 }, w2: { mask: 5 } } });
    expect(pd.queryMd('w13_scales')!.dims).toEqual([s.E, 2 * s.I]);
    const layer = new moe.layer.Primitive(pd);
    const w13 = Memory.create(pd.queryMd('w13')!, eng), w2 = Memory.create(pd.queryMd('w2')!, eng);
    const p13 = mem(eng, [s.E, s.K, 2 * s.I], q13.q, dt.s8), p2 = mem(eng, [s.E, s.I, s.K], q2.q, dt.s8);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, p13.desc, w13.desc)).execute(strm, { [ARG.FROM]: p13, [ARG.TO]: w13 });
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, p2.desc, w2.desc)).execute(strm, { [ARG.FROM]: p2, [ARG.TO]: w2 });
    const out = Memory.create(pd.queryMd('dst')!, eng);
    layer.execute(strm, {
      [ARG.SRC]: mem(eng, [s.T, s.K], d.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(eng, [s.T, s.E], d.logits), [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: out,
      [ARG.ATTR_SCALES | ARG.WEIGHTS]: mem(eng, [s.E, 2 * s.I], q13.sc), [ARG.ATTR_SCALES | ARG.WEIGHTS_1]: mem(eng, [s.E, s.K], q2.sc),
    });
    await strm.wait();
    expect(layer.stages.map((x) => x.name)).toEqual(['route', 'quantize_hidden', 'dispatch', 'gemm1', 'quantize_act', 'gemm2', 'combine']);
    const ref = refMoeLayer({ T: s.T, K: s.K, I: s.I, k: s.k, hidden: d.hidden, ids: layer.workspace.topkIds.values as Int32Array, weights: layer.workspace.topkWeights.values as Float32Array, w13: q13.deq, w2: q2.deq, glu: { alg: 'glu_swiglu', layout: 'halves' } });
    // int8 activations: error relative to the magnitude of the terms, a few quantization steps (1/127).
    const o = out.values as Float32Array;
    let worst = 0;
    for (let i = 0; i < ref.value.length; i++) worst = Math.max(worst, Math.abs(o[i] - ref.value[i]) / ref.mag[i]);
    expect(worst).toBeLessThan(0.03);
    expect(worst).toBeGreaterThan(0); // it really is quantized
  });

  it.each([
    ['fp8 e4m3 weights, f32 scales per expert and column', dt.f8_e4m3, { mask: 5 }, false],
    ['MXFP4 weights (f4_e2m1, e8m0 scales per 32 along K)', dt.f4_e2m1, { mask: 7, groups: [1, 32, 1], dataType: dt.e8m0 }, false],
    ['MXFP4 weights tag.any: scales stored beside the packed panels (+q) by the reorder', dt.f4_e2m1, { mask: 7, groups: [1, 32, 1], dataType: dt.e8m0 }, true],
  ] as const)('low-precision weights: %s', async (_n, wdt, scales, packed) => {
    const eng = await engine({ threads: 2, kernels: 'simd128' });
    const strm = new Stream(eng);
    const s = { T: 19, E: 4, k: 2, K: 64, I: 32 };
    const d = data(s, 77);
    const rng = mulberry32(78);
    // Weights as stored (codes rounded by write, decoded by read) and their scales; the reference multiplies them in float64.
    let rounded = 0, total = 0;
    const weight = (dims: [number, number, number], v: Float64Array): { m: Memory; sc: Memory; deq: Float64Array } => {
      const [G, R, C] = dims;
      const m = mem(eng, dims, v.map((x) => x * 20), wdt);
      const codes = m.read();
      codes.forEach((c, i) => { rounded += c !== Math.fround(v[i] * 20) ? 1 : 0; total++; });
      const grouped = 'groups' in scales;
      const sdims = grouped ? [G, R / 32, C] : [G, C];
      const sv = Float64Array.from({ length: sdims.reduce((a, b) => a * b, 1) }, () => (grouped ? 2 ** Math.floor(rng() * 4 - 6) : 0.02 + 0.03 * Math.abs(rng())));
      const sc = mem(eng, sdims, sv, grouped ? dt.e8m0 : dt.f32);
      const deq = new Float64Array(v.length);
      for (let g = 0; g < G; g++) for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) {
        const i = (g * R + r) * C + c;
        deq[i] = codes[i] * sv[grouped ? (g * (R / 32) + Math.floor(r / 32)) * C + c : g * C + c];
      }
      return { m, sc, deq };
    };
    const w13 = weight([s.E, s.K, 2 * s.I], d.w13), w2 = weight([s.E, s.I, s.K], d.w2);
    const anyMd = (m: Memory): MemoryDesc => memory.desc([...m.desc.dims], wdt, tag.any);
    const pd = new moe.layer.PrimitiveDesc(eng, {
      tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, routing: { renormalize: true },
      weights: packed ? { w13: anyMd(w13.m), w2: anyMd(w2.m) } : { w13: w13.m.desc, w2: w2.m.desc }, weightScales: { w13: scales, w2: scales },
    });
    const layer = new moe.layer.Primitive(pd);
    const out = Memory.create(pd.queryMd('dst')!, eng);
    const args = { [ARG.SRC]: mem(eng, [s.T, s.K], d.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(eng, [s.T, s.E], d.logits), [ARG.DST]: out };
    if (packed) {
      // The reorder stores each expert panel's scales beside it; the layer then takes the weights alone.
      const pack = (w: { m: Memory; sc: Memory }, md: MemoryDesc): Memory => {
        expect(md.packed?.quant).toBeDefined();
        const to = Memory.create(md, eng);
        new reorder.Primitive(new reorder.PrimitiveDesc(eng, w.m.desc, md)).execute(strm, { [ARG.FROM]: w.m, [ARG.TO]: to, [ARG.ATTR_SCALES | ARG.WEIGHTS]: w.sc });
        return to;
      };
      const p13 = pack(w13, pd.queryMd('w13')!), p2 = pack(w2, pd.queryMd('w2')!);
      expectDnnlError(() => layer.execute(strm, { ...args, [ARG.WEIGHTS]: p13, [ARG.WEIGHTS_1]: p2, [ARG.ATTR_SCALES | ARG.WEIGHTS_1]: w2.sc }), 'invalid_arguments', 'ARG.ATTR_SCALES | ARG.WEIGHTS_1 must not be given');
      layer.execute(strm, { ...args, [ARG.WEIGHTS]: p13, [ARG.WEIGHTS_1]: p2 });
    } else
      layer.execute(strm, { ...args, [ARG.WEIGHTS]: w13.m, [ARG.WEIGHTS_1]: w2.m, [ARG.ATTR_SCALES | ARG.WEIGHTS]: w13.sc, [ARG.ATTR_SCALES | ARG.WEIGHTS_1]: w2.sc });
    await strm.wait();
    const ref = refMoeLayer({ T: s.T, K: s.K, I: s.I, k: s.k, hidden: d.hidden, ids: layer.workspace.topkIds.values as Int32Array, weights: layer.workspace.topkWeights.values as Float32Array, w13: w13.deq, w2: w2.deq, glu: { alg: 'glu_swiglu', layout: 'halves' } });
    const o = out.values as Float32Array;
    for (let i = 0; i < ref.value.length; i++) expect(Math.abs(o[i] - ref.value[i]), `out[${i}]`).toBeLessThanOrEqual(1e-5 * ref.mag[i] + 1e-7);
    expect(rounded).toBeGreaterThan(total / 2); // the weights really are low precision
  });

  it('a local expert subset (expert map) computes only its experts; the ranks\' outputs sum to the whole', async () => {
    const eng = await engine({ threads: 1, kernels: 'simd128' });
    const strm = new Stream(eng);
    const s = { T: 19, E: 8, k: 2, K: 32, I: 24 };
    const d = data(s, 61);
    const whole = await runLayer(eng, s, d, { packed: false });
    const P = 2, G = s.E / P;
    const parts: Float32Array[] = [];
    for (let rank = 0; rank < P; rank++) {
      const pd = new moe.layer.PrimitiveDesc(eng, { tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, localExperts: G, routing: { renormalize: true },
        weights: { w13: memory.desc([G, s.K, 2 * s.I], dt.f32, tag.abc), w2: memory.desc([G, s.I, s.K], dt.f32, tag.abc) } });
      const layer = new moe.layer.Primitive(pd);
      const out = Memory.create(pd.queryMd('dst')!, eng);
      layer.execute(strm, {
        [ARG.SRC]: mem(eng, [s.T, s.K], d.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(eng, [s.T, s.E], d.logits), [ARG.DST]: out,
        [ARG.WEIGHTS]: mem(eng, [G, s.K, 2 * s.I], d.w13.subarray(rank * G * s.K * 2 * s.I, (rank + 1) * G * s.K * 2 * s.I)),
        [ARG.WEIGHTS_1]: mem(eng, [G, s.I, s.K], d.w2.subarray(rank * G * s.I * s.K, (rank + 1) * G * s.I * s.K)),
        [ARG.MOE_EXPERT_MAP]: mem(eng, [s.E], Array.from({ length: s.E }, (_, e) => (Math.floor(e / G) === rank ? e - rank * G : -1)), dt.s32),
      });
      await strm.wait();
      parts.push(Float32Array.from(out.values as Float32Array));
    }
    // For k = 2 a token's slots land on at most two ranks: the partial sums add up to the whole (to rounding).
    for (let i = 0; i < whole.out.length; i++) expect(Math.abs(parts[0][i] + parts[1][i] - whole.out[i])).toBeLessThanOrEqual(2e-6 * (Math.abs(whole.out[i]) + 1));
  });
});

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['relaxed 2T', { threads: 2, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.layer shared expert [%s]', (_n, opts) => {
  const s = { T: 13, E: 4, k: 2, K: 40, I: 24 };
  const Is = 20;

  interface SharedCase {
    readonly gate?: boolean;
    readonly split?: boolean;
    readonly glu?: moe.layer.LayerConfig['glu'];
    /** Weight data type and tag of the shared tensors (any: packed through a reorder); s8 adds per-column scales. */
    readonly wdt?: DataType;
    readonly wtag?: string;
  }

  /** Runs a layer with only a shared expert of interest (routed part as usual) and checks it against float64. */
  async function runShared(c: SharedCase, seed: number): Promise<void> {
    const eng = await engine(opts);
    const strm = new Stream(eng);
    const d = data(s, seed);
    const rng = mulberry32(seed + 1);
    const wdt = c.wdt ?? dt.f32;
    const q = wdt === dt.s8;
    const rnd = (n: number, amp: number): Float64Array => randomF32(rng, n).map((v) => (q ? Math.round(v * 127) : v * amp));
    // Shared weights in halves layout (gate columns [0, Is), up [Is, 2Is)) for the reference.
    const gateW = rnd(s.K * Is, 0.2), upW = rnd(s.K * Is, 0.2), w2 = rnd(Is * s.K, 0.2);
    const sc13 = randomF32(rng, 2 * Is).map((v) => 0.002 * (1.5 + v)), scUp = sc13.subarray(Is), scGate = sc13.subarray(0, Is);
    const sc2 = randomF32(rng, s.K).map((v) => 0.002 * (1.5 + v));
    const expertGate = randomF32(rng, s.K).map((v) => v * 0.3);
    const w13 = new Float64Array(s.K * 2 * Is);
    for (let kk = 0; kk < s.K; kk++) for (let j = 0; j < Is; j++) { w13[kk * 2 * Is + j] = gateW[kk * Is + j]; w13[kk * 2 * Is + Is + j] = upW[kk * Is + j]; }
    const tg = (c.wtag ?? 'ab') as keyof typeof tag;
    const md = (dims: number[]): MemoryDesc => memory.desc(dims, wdt, tag[tg]);
    const scale = q ? { mask: 2 } : undefined;
    const weights = c.split ? { gate: md([s.K, Is]), up: md([s.K, Is]), w2: md([Is, s.K]) } : { w13: md([s.K, 2 * Is]), w2: md([Is, s.K]) };
    const weightScales = !scale ? undefined : c.split ? { gate: scale, up: scale, w2: scale } : { w13: scale, w2: scale };
    const pd = new moe.layer.PrimitiveDesc(eng, {
      tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, routing: { renormalize: true },
      weights: { w13: memory.desc([s.E, s.K, 2 * s.I], dt.f32, tag.abc), w2: memory.desc([s.E, s.I, s.K], dt.f32, tag.abc) },
      sharedExpert: { intermediate: Is, gate: c.gate, glu: c.glu, weights, weightScales },
    });
    const layer = new moe.layer.Primitive(pd);
    const out = Memory.create(pd.queryMd('dst')!, eng);
    const args: Record<number, Memory> = {
      [ARG.SRC]: mem(eng, [s.T, s.K], d.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(eng, [s.T, s.E], d.logits),
      [ARG.WEIGHTS]: mem(eng, [s.E, s.K, 2 * s.I], d.w13), [ARG.WEIGHTS_1]: mem(eng, [s.E, s.I, s.K], d.w2), [ARG.DST]: out,
    };
    // A shared tensor: its plain logical values, reordered into the layer's descriptor (packed when tag.any).
    const put = (name: string, dims: number[], v: ArrayLike<number>, scales?: ArrayLike<number>): [Memory, Memory | undefined] => {
      const want = pd.queryMd(name)!;
      const plain = mem(eng, dims, v, wdt);
      if (want.equals(plain.desc)) return [plain, scales ? mem(eng, [dims[1]], scales) : undefined];
      const m = Memory.create(want, eng);
      const emb = want.packed?.quant !== undefined;
      const sm = scales ? mem(eng, [dims[1]], scales) : undefined;
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, want)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: m, ...(emb && sm ? { [ARG.ATTR_SCALES | ARG.WEIGHTS]: sm } : {}) });
      return [m, emb ? undefined : sm];
    };
    const bind = (id: number, [m, sm]: [Memory, Memory | undefined]): void => {
      args[id] = m;
      if (sm) args[ARG.ATTR_SCALES | id] = sm;
    };
    if (c.split) {
      bind(ARG.MOE_SHARED_GATE_PROJ, put('shared_gate', [s.K, Is], gateW, q ? scGate : undefined));
      bind(ARG.MOE_SHARED_UP_PROJ, put('shared_up', [s.K, Is], upW, q ? scUp : undefined));
    } else {
      bind(ARG.MOE_SHARED_W13, put('shared_w13', [s.K, 2 * Is], w13, q ? sc13 : undefined));
    }
    bind(ARG.MOE_SHARED_W2, put('shared_w2', [Is, s.K], w2, q ? sc2 : undefined));
    if (c.gate) args[ARG.MOE_SHARED_EXPERT_GATE] = mem(eng, [s.K, 1], expertGate);
    layer.execute(strm, args);
    await strm.wait();
    const ids = layer.workspace.topkIds.values as Int32Array, w = layer.workspace.topkWeights.values as Float32Array;
    const deq13 = q ? w13.map((v, i) => v * sc13[i % (2 * Is)]) : w13, deq2 = q ? w2.map((v, i) => v * sc2[i % s.K]) : w2;
    const ref = refMoeLayer({
      T: s.T, K: s.K, I: s.I, k: s.k, hidden: d.hidden, ids, weights: w, w13: d.w13, w2: d.w2, glu: { alg: 'glu_swiglu', layout: 'halves' },
      shared: { Is, w13: deq13, w2: deq2, gate: c.gate ? expertGate : undefined, glu: c.glu ? { layout: 'halves', ...c.glu } : undefined },
    });
    const got = out.values as Float32Array;
    const tol = wdt === dt.bf16 ? 2e-3 : 2e-5;
    let worst = 0;
    for (let i = 0; i < ref.value.length; i++) worst = Math.max(worst, Math.abs(got[i] - ref.value[i]) / (ref.mag[i] + 1e-30));
    expect(worst).toBeLessThan(tol);
    layer.destroy();
  }

  it('Qwen2-MoE gated shared expert: out += sigmoid(x . w_gate [K, 1]) * shared(x)', async () => {
    await runShared({ gate: true }, 41);
  });
  it('separate gate / up / down projections (no host-side concatenation), its own GLU (geglu_tanh beside routed swiglu)', async () => {
    await runShared({ split: true, glu: { alg: 'glu_geglu_tanh' } }, 42);
    await runShared({ split: true, glu: { alg: 'glu_swiglu', alpha: 1.3 }, gate: true }, 43);
  });
  it('shared weights as descriptors: tag.any packed, bf16, transposed strides, s8 with per-column scales', async () => {
    await runShared({ wtag: 'any', glu: { alg: 'glu_swiglu_oai', limit: 3 } }, 44);
    await runShared({ wdt: dt.bf16, wtag: 'ba' }, 45);
    await runShared({ wdt: dt.s8, split: true }, 46);
    await runShared({ wdt: dt.s8, wtag: 'any', gate: true }, 47);
  });
  it('rules: one of w13 or gate + up, dims, swiglu_oai needs one w13', async () => {
    const eng = await engine(opts);
    const base = { tokens: 4, hidden: 8, intermediate: 4, experts: 2, topK: 1 };
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, sharedExpert: { intermediate: 4, weights: { gate: memory.desc([8, 4], dt.f32, tag.ab) } } }), 'invalid_arguments', 'separate projections need both gate and up');
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, sharedExpert: { intermediate: 4, weights: { w13: memory.desc([8, 4], dt.f32, tag.ab) } } }), 'invalid_arguments', 'sharedExpert.weights.w13 dims [8,4] must be [8,8]');
    const sep = { gate: memory.desc([8, 4], dt.f32, tag.ab), up: memory.desc([8, 4], dt.f32, tag.ab) };
    expectDnnlError(() => new moe.layer.PrimitiveDesc(eng, { ...base, sharedExpert: { intermediate: 4, glu: { alg: 'glu_swiglu_oai' }, weights: sep } }), 'unimplemented', 'not glu_swiglu_oai');
  });
});
