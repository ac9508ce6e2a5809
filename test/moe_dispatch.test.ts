/**
 * moe.dispatch and moe.combine against plain-JS references written here: stable expert order, inverse
 * maps, offsets in place, expert maps (2 and 4 simulated ranks partition the single-rank rows), align
 * block size, batched format, runtime errors with nothing written, threads 1/2/3 and reference.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, dt, memory, moe, tag, type EngineOptions } from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { randomIds, refPlace } from './moe_dispatch_cases.js';
import { mulberry32, randomF32 } from './workloads.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));

function s32(eng: Engine, dims: number[], v: ArrayLike<number>): Memory {
  const m = Memory.create(memory.desc(dims, dt.s32, dims.length === 1 ? tag.a : tag.ab), eng);
  (m.values as Int32Array).set(Array.from(v));
  return m;
}

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['simd128 2T', { threads: 2, kernels: 'simd128' }],
  ['relaxed 3T', { threads: 3, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.dispatch / moe.combine [%s]', (_n, opts: EngineOptions) => {
  let eng: Engine;
  const cases = [
    { name: 'random', T: 37, E: 8, k: 2, K: 19, skew: undefined },
    { name: 'all tokens to expert 3', T: 20, E: 6, k: 1, K: 8, skew: 3 },
    { name: 'k = E', T: 5, E: 4, k: 4, K: 16, skew: undefined },
    { name: 'T = 1, E = 256', T: 1, E: 256, k: 8, K: 33, skew: undefined },
    { name: 'E = 1', T: 9, E: 1, k: 1, K: 4, skew: undefined },
  ];
  it('setup', async () => { eng = await Engine.create(opts); engines.push(eng); });

  for (const c of cases) {
    for (const block of [1, 4]) {
      it(`contiguous permute, block ${block} (${c.name})`, async () => {
        const strm = new Stream(eng);
        const rng = mulberry32(c.T * 7 + block);
        const ids = randomIds(rng, c.T, c.E, c.k, c.skew);
        const hidden = randomF32(rng, c.T * c.K);
        const pd = new moe.dispatch.PrimitiveDesc(eng, { tokens: c.T, topK: c.k, experts: c.E, hidden: memory.desc([c.T, c.K], dt.f32, tag.ab), alignBlockSize: block });
        const R = c.T * c.k + c.E * (block - 1);
        expect(pd.queryMd('dst')!.dims).toEqual([R, c.K]);
        const dst = Memory.create(pd.queryMd('dst')!, eng);
        (dst.values as Float32Array).fill(-5);
        const ti = s32(eng, [R], new Array(R).fill(99)), ks = s32(eng, [R], new Array(R).fill(99)), ro = s32(eng, [c.T, c.k], new Array(c.T * c.k).fill(99));
        const h = Memory.create(memory.desc([c.T, c.K], dt.f32, tag.ab), eng);
        h.write(hidden);
        new moe.dispatch.Primitive(pd).execute(strm, { [ARG.MOE_TOPK_IDS]: s32(eng, [c.T, c.k], ids), [ARG.SRC]: h, [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: ti, [ARG.MOE_TOKEN_KS]: ks, [ARG.MOE_ROW_OF]: ro });
        await strm.wait();
        const ref = refPlace(ids, c.T, c.k, c.E, undefined, block);
        expect(Array.from(dst.offsets)).toEqual(ref.offs);
        const tiv = ti.values as Int32Array, ksv = ks.values as Int32Array, rov = ro.values as Int32Array, y = dst.values as Float32Array;
        ref.rows.forEach((rows, g) => {
          for (let i = 0; i < ref.offs[g + 1] - ref.offs[g]; i++) {
            const r = ref.offs[g] + i;
            if (i < rows.length) {
              const [t, s] = rows[i];
              expect([tiv[r], ksv[r], rov[t * c.k + s]]).toEqual([t, s, r]);
              expect(Array.from(y.subarray(r * c.K, (r + 1) * c.K))).toEqual(Array.from(h.values as Float32Array).slice(t * c.K, (t + 1) * c.K));
            } else {
              expect([tiv[r], ksv[r]]).toEqual([-1, -1]); // alignment padding: zeros
              expect(y.subarray(r * c.K, (r + 1) * c.K).every((v) => v === 0)).toBe(true);
            }
          }
        });
        for (let r = ref.offs[c.E]; r < R; r++) {
          expect([tiv[r], ksv[r]]).toEqual([-1, -1]);
          expect(y[r * c.K]).toBe(-5); // unused capacity: values not written
        }
        // round trip: combine (weights 1) of the permuted rows gives k x hidden, exactly for k <= 2 terms.
        const out = Memory.create(memory.desc([c.T, c.K], dt.f32, tag.ab), eng);
        const cpd = new moe.combine.PrimitiveDesc(eng, { tokens: c.T, topK: c.k, src: dst.desc, dst: out.desc });
        const zeros = Memory.create(cpd.queryMd('topk_weights')!, eng);
        (zeros.values as Float32Array).fill(0);
        new moe.combine.Primitive(cpd).execute(strm, { [ARG.SRC]: dst, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: zeros, [ARG.DST]: out });
        await strm.wait();
        expect((out.values as Float32Array).every((v) => v === 0)).toBe(true); // weights were zero
        const wts = Memory.create(cpd.queryMd('topk_weights')!, eng);
        (wts.values as Float32Array).fill(1);
        new moe.combine.Primitive(cpd).execute(strm, { [ARG.SRC]: dst, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: wts, [ARG.DST]: out });
        await strm.wait();
        const hv = h.values as Float32Array, ov = out.values as Float32Array;
        for (let i = 0; i < c.T * c.K; i++) {
          let acc = 0;
          for (let s = 0; s < c.k; s++) acc = Math.fround(acc + hv[i]);
          expect(ov[i]).toBe(acc);
        }
      });
    }
  }

  it('index-only dispatch writes the offsets memory; expert maps split the rows over 2 and 4 ranks', async () => {
    const strm = new Stream(eng);
    const T = 29, E = 8, k = 3;
    const ids = randomIds(mulberry32(3), T, E, k);
    for (const P of [1, 2, 4]) {
      const G = E / P;
      const seen = new Set<string>();
      for (let rank = 0; rank < P; rank++) {
        const map = Int32Array.from({ length: E }, (_, e) => (Math.floor(e / G) === rank ? e - rank * G : -1));
        const pd = new moe.dispatch.PrimitiveDesc(eng, { tokens: T, topK: k, experts: E, localExperts: G, expertMap: true });
        expect(pd.queryMd('dst')!.dims).toEqual([G + 1]);
        const offs = Memory.create(pd.queryMd('dst')!, eng);
        const ti = Memory.create(pd.queryMd('token_index')!, eng), ks = Memory.create(pd.queryMd('token_ks')!, eng), ro = Memory.create(pd.queryMd('row_of')!, eng);
        new moe.dispatch.Primitive(pd).execute(strm, { [ARG.MOE_TOPK_IDS]: s32(eng, [T, k], ids), [ARG.MOE_EXPERT_MAP]: s32(eng, [E], map), [ARG.DST]: offs, [ARG.MOE_TOKEN_INDEX]: ti, [ARG.MOE_TOKEN_KS]: ks, [ARG.MOE_ROW_OF]: ro });
        await strm.wait();
        const ref = refPlace(ids, T, k, G, map);
        expect(Array.from(offs.values as Int32Array)).toEqual(ref.offs);
        const rov = ro.values as Int32Array;
        for (let i = 0; i < T * k; i++) expect(rov[i] >= 0).toBe(map[ids[i]] >= 0);
        for (let r = 0; r < ref.offs[G]; r++) seen.add(`${(ti.values as Int32Array)[r]},${(ks.values as Int32Array)[r]}`);
      }
      expect(seen.size).toBe(T * k); // the ranks' rows partition all slots
    }
  });

  it('batched format: [G, C, K], counts, rows past the count never written; overflow is an error', async () => {
    const strm = new Stream(eng);
    const T = 17, E = 5, k = 2, K = 6, C = 20;
    const ids = randomIds(mulberry32(8), T, E, k, 1);
    const h = Memory.create(memory.desc([T, K], dt.f32, tag.ab), eng);
    h.write(randomF32(mulberry32(9), T * K));
    const pd = new moe.dispatch.PrimitiveDesc(eng, { tokens: T, topK: k, experts: E, hidden: h.desc, format: 'batched', maxTokens: C });
    const dst = Memory.create(pd.queryMd('dst')!, eng);
    (dst.values as Float32Array).fill(-5);
    const cnt = Memory.create(pd.queryMd('expert_num_tokens')!, eng), ti = Memory.create(pd.queryMd('token_index')!, eng);
    const ks = Memory.create(pd.queryMd('token_ks')!, eng), ro = Memory.create(pd.queryMd('row_of')!, eng);
    const args = { [ARG.MOE_TOPK_IDS]: s32(eng, [T, k], ids), [ARG.SRC]: h, [ARG.DST]: dst, [ARG.MOE_EXPERT_NUM_TOKENS]: cnt, [ARG.MOE_TOKEN_INDEX]: ti, [ARG.MOE_TOKEN_KS]: ks, [ARG.MOE_ROW_OF]: ro };
    new moe.dispatch.Primitive(pd).execute(strm, args);
    await strm.wait();
    const ref = refPlace(ids, T, k, E);
    expect(Array.from(cnt.values as Int32Array)).toEqual(ref.rows.map((r) => r.length));
    const y = dst.values as Float32Array, hv = h.values as Float32Array;
    ref.rows.forEach((rows, g) => {
      for (let i = 0; i < C; i++) {
        if (i < rows.length) {
          expect((ro.values as Int32Array)[rows[i][0] * k + rows[i][1]]).toBe(g * C + i);
          expect(Array.from(y.subarray((g * C + i) * K, (g * C + i + 1) * K))).toEqual(Array.from(hv.subarray(rows[i][0] * K, (rows[i][0] + 1) * K)));
        } else {
          expect((ti.values as Int32Array)[g * C + i]).toBe(-1);
          expect(y[(g * C + i) * K]).toBe(-5);
        }
      }
    });
    const small = new moe.dispatch.PrimitiveDesc(eng, { tokens: T, topK: k, experts: E, hidden: h.desc, format: 'batched', maxTokens: 4 });
    const d2 = Memory.create(small.queryMd('dst')!, eng);
    (d2.values as Float32Array).fill(-5);
    new moe.dispatch.Primitive(small).execute(strm, { ...args, [ARG.DST]: d2, [ARG.MOE_EXPERT_NUM_TOKENS]: Memory.create(small.queryMd('expert_num_tokens')!, eng), [ARG.MOE_TOKEN_INDEX]: Memory.create(small.queryMd('token_index')!, eng), [ARG.MOE_TOKEN_KS]: Memory.create(small.queryMd('token_ks')!, eng) });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'expert 1 receives');
    expect((d2.values as Float32Array).every((v) => v === -5)).toBe(true);
  });

  it('bad ids and map entries are errors with nothing written', async () => {
    const strm = new Stream(eng);
    const T = 3, E = 4, k = 2;
    const pd = new moe.dispatch.PrimitiveDesc(eng, { tokens: T, topK: k, experts: E, localExperts: 2 });
    const ti = Memory.create(pd.queryMd('token_index')!, eng), ks = Memory.create(pd.queryMd('token_ks')!, eng), ro = Memory.create(pd.queryMd('row_of')!, eng), offs = Memory.create(pd.queryMd('dst')!, eng);
    for (const m of [ti, ks, ro, offs]) (m.values as Int32Array).fill(77);
    const run = (ids: number[], map: number[]): Promise<void> => {
      new moe.dispatch.Primitive(pd).execute(strm, { [ARG.MOE_TOPK_IDS]: s32(eng, [T, k], ids), [ARG.MOE_EXPERT_MAP]: s32(eng, [E], map), [ARG.DST]: offs, [ARG.MOE_TOKEN_INDEX]: ti, [ARG.MOE_TOKEN_KS]: ks, [ARG.MOE_ROW_OF]: ro });
      return strm.wait();
    };
    await expectDnnlReject(run([0, 1, 2, 4, 1, 0], [0, 1, -1, -1]), 'invalid_arguments', 'ARG.MOE_TOPK_IDS[1, 1] = 4 is out of range [0, experts = 4)');
    await expectDnnlReject(run([0, 1, 2, 3, 1, 0], [0, 2, -1, -1]), 'invalid_arguments', 'ARG.MOE_EXPERT_MAP[1] = 2 is out of range [-1, local experts = 2)');
    await expectDnnlReject(run([0, -1, 2, 3, 1, 0], [0, 1, -1, -1]), 'invalid_arguments', 'ARG.MOE_TOPK_IDS[0, 1] = -1');
    for (const m of [ti, ks, ro, offs]) expect((m.values as Int32Array).every((v) => v === 77)).toBe(true);
  });

  it('contiguous: an expert repeated in a token\'s slots gets one routed row per slot; combine sums them (float64 reference)', async () => {
    const strm = new Stream(eng);
    for (const [T, E, k, K, block] of [[13, 5, 3, 9, 1], [7, 2, 2, 17, 4], [5, 3, 3, 8, 1], [6, 3, 2, 33, 2]] as const) {
      const rng = mulberry32(T * 31 + k);
      const ids = Int32Array.from({ length: T * k }, () => Math.floor(rng() * E));
      for (let t = 0; t < T; t += 2) ids.fill(ids[t * k], t * k, (t + 1) * k); // every other token: one expert in all slots
      const hidden = randomF32(rng, T * K), wv = randomF32(rng, T * k);
      const pd = new moe.dispatch.PrimitiveDesc(eng, { tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], dt.f32, tag.ab), alignBlockSize: block });
      const dst = Memory.create(pd.queryMd('dst')!, eng);
      const ti = Memory.create(pd.queryMd('token_index')!, eng), ks = Memory.create(pd.queryMd('token_ks')!, eng), ro = Memory.create(pd.queryMd('row_of')!, eng);
      const h = Memory.create(memory.desc([T, K], dt.f32, tag.ab), eng);
      h.write(hidden);
      new moe.dispatch.Primitive(pd).execute(strm, { [ARG.MOE_TOPK_IDS]: s32(eng, [T, k], ids), [ARG.SRC]: h, [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: ti, [ARG.MOE_TOKEN_KS]: ks, [ARG.MOE_ROW_OF]: ro });
      await strm.wait();
      const ref = refPlace(ids, T, k, E, undefined, block);
      expect(Array.from(dst.offsets)).toEqual(ref.offs);
      const tiv = ti.values as Int32Array, ksv = ks.values as Int32Array, rov = ro.values as Int32Array, y = dst.values as Float32Array;
      ref.rows.forEach((rows, g) => rows.forEach(([t, sl], i) => {
        const r = ref.offs[g] + i;
        expect([tiv[r], ksv[r], rov[t * k + sl]]).toEqual([t, sl, r]);
        expect(Array.from(y.subarray(r * K, (r + 1) * K))).toEqual(Array.from(h.values as Float32Array).slice(t * K, (t + 1) * K));
      }));
      expect(new Set(Array.from(rov)).size).toBe(T * k); // every slot its own row
      // An "expert" scales its rows by (g + 1); the combine then gives sum_s w[t, s] (e_s + 1) x[t].
      ref.rows.forEach((rows, g) => rows.forEach((_, i) => {
        const r = ref.offs[g] + i;
        for (let n = 0; n < K; n++) y[r * K + n] = Math.fround(y[r * K + n] * (g + 1));
      }));
      const out = Memory.create(memory.desc([T, K], dt.f32, tag.ab), eng);
      const cpd = new moe.combine.PrimitiveDesc(eng, { tokens: T, topK: k, src: dst.desc, dst: out.desc });
      const w = Memory.create(cpd.queryMd('topk_weights')!, eng);
      w.write(wv);
      new moe.combine.Primitive(cpd).execute(strm, { [ARG.SRC]: dst, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: out });
      await strm.wait();
      const got = out.read(), wf = w.read();
      for (let t = 0; t < T; t++) for (let n = 0; n < K; n++) {
        let want = 0, mag = 0;
        for (let sl = 0; sl < k; sl++) {
          const term = wf[t * k + sl] * (ids[t * k + sl] + 1) * hidden[t * K + n];
          want += term;
          mag += Math.abs(term);
        }
        expect(Math.abs(got[t * K + n] - want), `T${T} k${k}: out[${t}, ${n}]`).toBeLessThanOrEqual(4 * 2 ** -24 * k * mag);
      }
    }
  });

  it('batched: an expert repeated in a token\'s slots is an error (one row per token and expert), nothing written', async () => {
    const strm = new Stream(eng);
    const T = 3, E = 4, k = 2, C = 4;
    const pd = new moe.dispatch.PrimitiveDesc(eng, { tokens: T, topK: k, experts: E, format: 'batched', maxTokens: C });
    const mems = [pd.queryMd('token_index')!, pd.queryMd('token_ks')!, pd.queryMd('row_of')!, pd.queryMd('expert_num_tokens')!].map((md) => Memory.create(md, eng));
    for (const m of mems) (m.values as Int32Array).fill(77);
    const [ti, ks, ro, cnt] = mems;
    new moe.dispatch.Primitive(pd).execute(strm, { [ARG.MOE_TOPK_IDS]: s32(eng, [T, k], [0, 1, 2, 2, 1, 0]), [ARG.MOE_TOKEN_INDEX]: ti, [ARG.MOE_TOKEN_KS]: ks, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_EXPERT_NUM_TOKENS]: cnt });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_TOPK_IDS[1, 1] = 2 repeats slot 0 of token 1 (the batched format holds one row per token and expert');
    for (const m of mems) expect((m.values as Int32Array).every((v) => v === 77)).toBe(true);
  });

  it('T = 0: dispatch (contiguous, aligned, index-only, batched) and combine (routed, scattered) are no-ops', async () => {
    const strm = new Stream(eng);
    const E = 3, k = 2, K = 5, C = 4, B = 4;
    const hidden = memory.desc([0, K], dt.f32, tag.ab);
    const run = (pd: moe.dispatch.PrimitiveDesc, withHidden: boolean): Record<string, Memory> => {
      const outs: Record<string, Memory> = {};
      const q = (what: Parameters<moe.dispatch.PrimitiveDesc['queryMd']>[0]): Memory | undefined => {
        const md = pd.queryMd(what);
        if (!md) return undefined;
        const m = Memory.create(md, eng);
        if (m.elementCount) (m.values as Int32Array | Float32Array).fill(77);
        outs[what] = m;
        return m;
      };
      new moe.dispatch.Primitive(pd).execute(strm, {
        [ARG.MOE_TOPK_IDS]: q('topk_ids'), [ARG.SRC]: withHidden ? q('src') : undefined, [ARG.DST]: q('dst'), [ARG.MOE_TOKEN_INDEX]: q('token_index'),
        [ARG.MOE_TOKEN_KS]: q('token_ks'), [ARG.MOE_ROW_OF]: q('row_of'), [ARG.MOE_EXPERT_NUM_TOKENS]: q('expert_num_tokens'),
      });
      return outs;
    };
    const aligned = new moe.dispatch.PrimitiveDesc(eng, { tokens: 0, topK: k, experts: E, hidden, alignBlockSize: B });
    expect(aligned.queryMd('dst')!.dims).toEqual([E * (B - 1), K]);
    const a = run(aligned, true);
    const i = run(new moe.dispatch.PrimitiveDesc(eng, { tokens: 0, topK: k, experts: E }), false);
    const b = run(new moe.dispatch.PrimitiveDesc(eng, { tokens: 0, topK: k, experts: E, hidden, format: 'batched', maxTokens: C }), true);
    await strm.wait();
    expect(Array.from(a.dst.offsets), 'aligned offsets').toEqual([0, 0, 0, 0]);
    expect(Array.from(a.token_index.read()), 'aligned token_index: unused capacity').toEqual(new Array<number>(E * (B - 1)).fill(-1));
    expect(Array.from(a.dst.read()).every((v) => v === 77), 'aligned rows past offsets[G] never written').toBe(true);
    expect(Array.from(i.dst.read()), 'index-only offsets').toEqual([0, 0, 0, 0]);
    expect(Array.from(b.expert_num_tokens.read()), 'batched counts').toEqual([0, 0, 0]);
    expect(Array.from(b.dst.read()).every((v) => v === 77), 'batched rows never written').toBe(true);
    for (const [src, input] of [[memory.desc([0, K], dt.f32, tag.ab), 'routed'], [memory.desc([0, K], dt.f32, tag.ab), 'scattered'], [memory.desc([E, C, K], dt.f32, tag.abc), 'routed']] as const) {
      const cpd = new moe.combine.PrimitiveDesc(eng, { tokens: 0, topK: k, input, src, dst: memory.desc([0, K], dt.f32, tag.ab) });
      const c = (what: Parameters<moe.combine.PrimitiveDesc['queryMd']>[0]): Memory | undefined => {
        const md = cpd.queryMd(what);
        return md && Memory.create(md, eng);
      };
      const y = c('src')!;
      if (y.elementCount) (y.values as Float32Array).fill(3);
      new moe.combine.Primitive(cpd).execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: c('row_of'), [ARG.MOE_TOPK_WEIGHTS]: c('topk_weights'), [ARG.DST]: c('dst') });
      await strm.wait();
      expect(Array.from(y.read()).every((v) => v === 3)).toBe(true);
    }
  });

  it('combine: bad row_of is an error; scattered input equals routed input weighted, bit for bit', async () => {
    const strm = new Stream(eng);
    const T = 13, k = 3, N = 37, R = T * k;
    const rng = mulberry32(77);
    const y = Memory.create(memory.desc([R, N], dt.f32, tag.ab), eng);
    y.write(randomF32(rng, R * N));
    const perm = Array.from({ length: R }, (_, i) => i).sort(() => rng() - 0.5);
    const rowOf = perm.map((r, i) => (i % 5 === 4 ? -1 : r)); // some slots not routed here
    const w = Memory.create(memory.desc([T, k], dt.f32, tag.ab), eng);
    w.write(randomF32(rng, T * k));
    const out = Memory.create(memory.desc([T, N], dt.f32, tag.ab), eng);
    const routed = new moe.combine.PrimitiveDesc(eng, { tokens: T, topK: k, src: y.desc, dst: out.desc });
    new moe.combine.Primitive(routed).execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: s32(eng, [T, k], rowOf), [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: out });
    // the scattered equivalent: row t*k+s holds f32(w * y[row_of])
    const sc = Memory.create(memory.desc([R, N], dt.f32, tag.ab), eng);
    const yv = y.values as Float32Array, wv = w.values as Float32Array, sv = sc.values as Float32Array;
    for (let i = 0; i < R; i++) if (rowOf[i] >= 0) for (let n = 0; n < N; n++) sv[i * N + n] = Math.fround(wv[i] * yv[rowOf[i] * N + n]);
    const out2 = Memory.create(out.desc, eng);
    const scat = new moe.combine.PrimitiveDesc(eng, { tokens: T, topK: k, input: 'scattered', src: sc.desc, dst: out2.desc });
    new moe.combine.Primitive(scat).execute(strm, { [ARG.SRC]: sc, [ARG.MOE_ROW_OF]: s32(eng, [T, k], rowOf), [ARG.DST]: out2 });
    await strm.wait();
    expect(Buffer.from((out2.values as Float32Array).buffer.slice(0)).length).toBeGreaterThan(0);
    expect(Array.from(out2.values as Float32Array)).toEqual(Array.from(out.values as Float32Array));
    // float64 check of the routed result
    const ov = out.values as Float32Array;
    for (let t = 0; t < T; t++) for (let n = 0; n < N; n++) {
      let ref = 0, mag = 0;
      for (let s = 0; s < k; s++) if (rowOf[t * k + s] >= 0) { ref += wv[t * k + s] * yv[rowOf[t * k + s] * N + n]; mag += Math.abs(wv[t * k + s] * yv[rowOf[t * k + s] * N + n]); }
      expect(Math.abs(ov[t * N + n] - ref)).toBeLessThanOrEqual(4e-7 * mag + 1e-30);
    }
    (out.values as Float32Array).fill(3);
    new moe.combine.Primitive(routed).execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: s32(eng, [T, k], rowOf.map((r, i) => (i === 7 ? R : r))), [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: out });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', `ARG.MOE_ROW_OF[2, 1] = ${R} is out of range [-1, rows = ${R})`);
    expect((out.values as Float32Array).every((v) => v === 3)).toBe(true);
  });

  it('descriptor rules', () => {
    expectDnnlError(() => new moe.dispatch.PrimitiveDesc(eng, { tokens: 4, topK: 5, experts: 4 }), 'invalid_arguments', 'topK must be an integer in [1, experts = 4]');
    expectDnnlError(() => new moe.dispatch.PrimitiveDesc(eng, { tokens: 4, topK: 1, experts: 4, format: 'batched' }), 'invalid_arguments', 'needs maxTokens');
    expectDnnlError(() => new moe.dispatch.PrimitiveDesc(eng, { tokens: 4, topK: 1, experts: 4, hidden: memory.desc([5, 8], dt.f32, tag.ab) }), 'invalid_arguments', 'hidden must be a plain [tokens = 4, K]');
    expectDnnlError(() => new moe.dispatch.PrimitiveDesc(eng, { tokens: 4, topK: 1, experts: 4, hidden: memory.desc([4, 8], dt.s8, tag.ab) }), 'unimplemented', 'hidden data type s8');
    expectDnnlError(() => new moe.combine.PrimitiveDesc(eng, { tokens: 4, topK: 2, input: 'scattered', src: memory.desc([7, 8], dt.f32, tag.ab), dst: memory.desc([4, 8], dt.f32, tag.ab) }), 'invalid_arguments', 'a scattered src must have tokens x topK = 8 rows');
    expectDnnlError(() => new moe.combine.PrimitiveDesc(eng, { tokens: 4, topK: 2, src: memory.desc([8, 8], dt.f32, tag.ab), dst: memory.desc([4, 9], dt.f32, tag.ab) }), 'invalid_arguments', 'dst must be [tokens = 4, N = 8]');
  });
});
