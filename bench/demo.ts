/**
 * `npm run demo`: one MoE layer's expert GEMM (E=8, top-2, 512 tokens, K=1024, N=2816, skewed routing
 * with an empty expert) through the grouped matmul of RFC Proposal #1, on every thread count from 1
 * to the core count; checks sampled rows against a float64 loop and prints a short table.
 */
import { availableParallelism } from 'node:os';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, offsets, reorder, tag } from '../src/index.js';
import { fillRandom, timeIt } from './timing.js';
import { WORKLOADS } from './workloads.js';

const w = WORKLOADS['moe-a'];
const E = w.sizes.length, { K, N } = w;
const totalM = w.sizes.reduce((a, b) => a + b, 0);
console.log(`groupdnn demo: ${w.description}`);
console.log(`rows per expert: ${w.sizes.join(' ')}  (offsets ${Array.from(offsets.fromSizes(w.sizes)).join(',')})\n`);

const table: string[][] = [['threads', 'impl', 'weights', 'median ms', 'GFLOP/s', 'max rel err']];
for (let threads = 1; threads <= availableParallelism(); threads++) {
  const eng = await Engine.create({ threads });
  const strm = new Stream(eng);
  // Proposal #1: grouped src/dst descriptors (rows per expert known only at execution), dense 3D weights.
  const srcMd = memory.desc.grouped([totalM, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([totalM, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const userWeiMd = memory.desc([E, K, N], dt.f32, tag.abc);
  const src = Memory.create(srcMd, eng);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]); // one offsets buffer for src and dst
  const userWei = Memory.create(userWeiMd, eng);
  fillRandom(src.values as Float32Array, 1);
  fillRandom(userWei.values as Float32Array, 2, 0.05);
  offsets.fromSizes(w.sizes, src.offsets);

  for (const form of ['packed', 'abc'] as const) {
    const pd = new matmul.PrimitiveDesc(eng, srcMd, form === 'packed' ? memory.desc([E, K, N], dt.f32, tag.any) : userWeiMd, dstMd);
    let wei = userWei;
    if (form === 'packed') {
      wei = Memory.create(pd.queryMd('weights')!, eng);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, userWeiMd, wei.desc)).execute(strm, { [ARG.FROM]: userWei, [ARG.TO]: wei });
    }
    const mm = new matmul.Primitive(pd);
    const t = await timeIt(async () => {
      mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      await strm.wait();
    }, { minMs: 800 });
    table.push([String(threads), pd.implInfo, form, t.median.toFixed(2), ((2 * totalM * K * N) / t.median / 1e6).toFixed(1), maxRelErr(src, userWei, dst).toExponential(1)]);
  }
  eng.release();
}

/** Float64 check of every 37th row: |got - ref| / sum_k |a_k w_kn|. */
function maxRelErr(src: Memory, wei: Memory, dst: Memory): number {
  const x = src.values as Float32Array, wv = wei.values as Float32Array, y = dst.values as Float32Array;
  const o = src.offsets;
  let worst = 0;
  for (let g = 0; g < E; g++)
    for (let m = o[g]; m < o[g + 1]; m += 37)
      for (let n = 0; n < N; n += 11) {
        let ref = 0, mag = 0;
        for (let k = 0; k < K; k++) {
          const p = x[m * K + k] * wv[(g * K + k) * N + n];
          ref += p;
          mag += Math.abs(p);
        }
        worst = Math.max(worst, Math.abs(y[m * N + n] - ref) / mag);
      }
  return worst;
}

const widths = table[0].map((_, c) => Math.max(...table.map((r) => r[c].length)));
for (const r of table) console.log(r.map((v, c) => v.padEnd(widths[c])).join('  '));

// ---------------------------------------------------------------------------------------------------
// The whole MoE layer around the grouped matmul: route -> dispatch -> GEMM1 (gather + fused SwiGLU) ->
// GEMM2 (scatter x routing weight) -> combine, per stage, checked against float64 on sampled tokens.
await layerDemo();
await trainingDemo();

async function layerDemo(): Promise<void> {
  const T = 256, E = 16, k = 2, Kh = 1024, I = 704;
  console.log(`\nMoE layer: T=${T} tokens, E=${E} experts, top-${k} softmax routing (renormalized), hidden ${Kh}, intermediate ${I}, SwiGLU, packed f32 weights`);
  const stageTable: string[][] = [['threads', 'stage', 'impl', 'median ms', 'share of stages']];
  for (let threads = 1; threads <= availableParallelism(); threads++) {
    const eng = await Engine.create({ threads });
    const strm = new Stream(eng);
    const pd = new moe.layer.PrimitiveDesc(eng, { tokens: T, hidden: Kh, intermediate: I, experts: E, topK: k, routing: { renormalize: true } });
    const layer = new moe.layer.Primitive(pd);
    const make = (md: ReturnType<typeof memory.desc>, seed: number, scale = 1): Memory => {
      const m = Memory.create(md, eng);
      fillRandom(m.values as Float32Array, seed, scale);
      return m;
    };
    const hidden = make(pd.queryMd('hidden')!, 11), logits = make(pd.queryMd('logits')!, 12, 4);
    const w13u = make(memory.desc([E, Kh, 2 * I], dt.f32, tag.abc), 13, 0.05), w2u = make(memory.desc([E, I, Kh], dt.f32, tag.abc), 14, 0.05);
    const w13 = Memory.create(pd.queryMd('w13')!, eng), w2 = Memory.create(pd.queryMd('w2')!, eng);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, w13u.desc, w13.desc)).execute(strm, { [ARG.FROM]: w13u, [ARG.TO]: w13 });
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, w2u.desc, w2.desc)).execute(strm, { [ARG.FROM]: w2u, [ARG.TO]: w2 });
    const out = Memory.create(pd.queryMd('dst')!, eng);
    const args = { [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: out };
    const whole = await timeIt(async () => {
      layer.execute(strm, args);
      await strm.wait();
    }, { minMs: 800 });
    // Each stage is timed on its own (a wait after each): shares are of the stages' sum, which can differ from
    // the whole layer's time on a busy machine (the layer waits once).
    const stageMs: [string, string, number][] = [];
    for (const s of layer.stages) {
      const t = await timeIt(async () => {
        s.execute(strm, args);
        await strm.wait();
      }, { minMs: 300, minRuns: 5 });
      stageMs.push([s.name, s.implInfo, t.median]);
    }
    const sum = stageMs.reduce((a, [, , ms]) => a + ms, 0);
    for (const [name, impl, ms] of stageMs) stageTable.push([String(threads), name, impl, ms.toFixed(3), `${((100 * ms) / sum).toFixed(1)}%`]);
    stageTable.push([String(threads), 'stages, each waited', '', sum.toFixed(3), '100%']);
    stageTable.push([String(threads), 'whole layer (one wait)', pd.implInfo, whole.median.toFixed(3), `${((2 * T * k * 3 * Kh * I) / whole.median / 1e6).toFixed(1)} GFLOP/s`]);
    if (threads === 1) {
      const sizes = new Array<number>(E).fill(0);
      (layer.workspace.topkIds.values as Int32Array).forEach((e) => sizes[e]++);
      console.log(`rows per expert: ${sizes.join(' ')}; max rel err on sampled tokens vs float64: ${layerErr(layer, hidden, w13u, w2u, out, T, k, Kh, I).toExponential(1)}`);
    }
    layer.destroy();
    eng.release();
  }
  const wd = stageTable[0].map((_, c) => Math.max(...stageTable.map((r) => r[c].length)));
  for (const r of stageTable) console.log(r.map((v, c) => v.padEnd(wd[c])).join('  '));
}

/**
 * One training step of the same layer: the training forward (it keeps what the backward reads) and
 * the backward (gradients of hidden, router logits, w13, w2), per stage, at each thread count.
 */
async function trainingDemo(): Promise<void> {
  const T = 256, E = 16, k = 2, Kh = 1024, I = 704;
  console.log(`\nMoE layer training step (same shape; plain f32 weights): forward_training, then the backward`);
  const table: string[][] = [['threads', 'stage', 'impl', 'median ms']];
  for (let threads = 1; threads <= availableParallelism(); threads++) {
    const eng = await Engine.create({ threads });
    const strm = new Stream(eng);
    const pd = new moe.layer.PrimitiveDesc(eng, { tokens: T, hidden: Kh, intermediate: I, experts: E, topK: k, routing: { renormalize: true }, propKind: 'forward_training' });
    const fwd = new moe.layer.Primitive(pd);
    const bpd = new moe.layer.BackwardPrimitiveDesc(eng, pd);
    const bwd = new moe.layer.BackwardPrimitive(bpd, fwd);
    const make = (md: ReturnType<typeof memory.desc>, seed?: number, scale = 1): Memory => {
      const m = Memory.create(md, eng);
      if (seed !== undefined) fillRandom(m.values as Float32Array, seed, scale);
      return m;
    };
    const a = {
      [ARG.SRC]: make(pd.queryMd('hidden')!, 11), [ARG.MOE_ROUTER_LOGITS]: make(pd.queryMd('logits')!, 12, 4),
      [ARG.WEIGHTS]: make(pd.queryMd('w13')!, 13, 0.05), [ARG.WEIGHTS_1]: make(pd.queryMd('w2')!, 14, 0.05), [ARG.DST]: make(pd.queryMd('dst')!),
    };
    const b = {
      [ARG.DIFF_DST]: make(bpd.queryMd('diff_dst')!, 15, 0.01), [ARG.MOE_ROUTER_LOGITS]: a[ARG.MOE_ROUTER_LOGITS], [ARG.WEIGHTS]: a[ARG.WEIGHTS], [ARG.WEIGHTS_1]: a[ARG.WEIGHTS_1],
      [ARG.DIFF_SRC]: make(bpd.queryMd('diff_src')!), [ARG.MOE_DIFF_ROUTER_LOGITS]: make(bpd.queryMd('diff_logits')!),
      [ARG.DIFF_WEIGHTS]: make(bpd.queryMd('diff_w13')!), [ARG.DIFF_WEIGHTS_1]: make(bpd.queryMd('diff_w2')!),
    };
    const timed = async (name: string, impl: string, run: () => void, minMs: number): Promise<number> => {
      const t = await timeIt(async () => {
        run();
        await strm.wait();
      }, { minMs, minRuns: 5 });
      table.push([String(threads), name, impl, t.median.toFixed(3)]);
      return t.median;
    };
    const f = await timed('forward_training', pd.implInfo, () => fwd.execute(strm, a), 600);
    for (const s of fwd.stages) await timed(`  ${s.name}`, s.implInfo, () => s.execute(strm, a), 200);
    const g = await timed('backward', bpd.implInfo, () => bwd.execute(strm, b), 600);
    for (const s of bwd.stages) await timed(`  ${s.name}`, s.implInfo, () => s.execute(strm, b), 200);
    table.push([String(threads), 'backward / forward_training', '', (g / f).toFixed(2)]);
    bwd.destroy();
    fwd.destroy();
    eng.release();
  }
  const wd = table[0].map((_, c) => Math.max(...table.map((r) => r[c].length)));
  for (const r of table) console.log(r.map((v, c) => v.padEnd(wd[c])).join('  '));
}

/** Float64 check of every 31st token: sum over its slots of weight * (swiglu(x W13) W2). */
function layerErr(layer: moe.layer.Primitive, hidden: Memory, w13: Memory, w2: Memory, out: Memory, T: number, k: number, Kh: number, I: number): number {
  const x = hidden.values as Float32Array, a = w13.values as Float32Array, b = w2.values as Float32Array, y = out.values as Float32Array;
  const ids = layer.workspace.topkIds.values as Int32Array, tw = layer.workspace.topkWeights.values as Float32Array;
  let worst = 0;
  for (let t = 0; t < T; t += 31) {
    const ref = new Float64Array(Kh), mag = new Float64Array(Kh);
    for (let s = 0; s < k; s++) {
      const e = ids[t * k + s], wgt = tw[t * k + s];
      const act = new Float64Array(I);
      for (let j = 0; j < I; j++) {
        let g = 0, u = 0;
        for (let q = 0; q < Kh; q++) {
          g += x[t * Kh + q] * a[(e * Kh + q) * 2 * I + j];
          u += x[t * Kh + q] * a[(e * Kh + q) * 2 * I + I + j];
        }
        act[j] = (g / (1 + Math.exp(-g))) * u;
      }
      for (let n = 0; n < Kh; n++) {
        let v = 0, m = 0;
        for (let j = 0; j < I; j++) {
          v += act[j] * b[(e * I + j) * Kh + n];
          m += Math.abs(act[j] * b[(e * I + j) * Kh + n]);
        }
        ref[n] += wgt * v;
        mag[n] += Math.abs(wgt) * m;
      }
    }
    for (let n = 0; n < Kh; n++) worst = Math.max(worst, Math.abs(y[t * Kh + n] - ref[n]) / (mag[n] + 1e-30));
  }
  return worst;
}
