/**
 * `npm run demo`: one MoE layer's expert GEMM (E=8, top-2, 512 tokens, K=1024, N=2816, skewed routing
 * with an empty expert) through the grouped matmul of RFC Proposal #1, on every thread count from 1
 * to the core count; checks sampled rows against a float64 loop and prints a short table.
 */
import { availableParallelism } from 'node:os';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, reorder, tag } from '../src/index.js';
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
