// Browser demo (npm run serve, then open /examples/browser/): one MoE layer's expert GEMM (E=8, top-2,
// skewed routing with an empty expert) through the grouped matmul at 1 and N threads, with per-expert
// sizes and GFLOP/s drawn as SVG bar charts; where the page has WebGPU (navigator.gpu), a third row runs
// the same matmul on the gpu engine, and a whole MoE layer (router logits -> output) runs on the cpu
// engine and on the gpu engine side by side. Uses dist/ as shipped (npm run build).
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, offsets, reorder, tag } from 'groupdnn';

const E = 8, K = 1024, N = 1408;
const sizes = [196, 120, 80, 55, 35, 20, 6, 0];
const R = sizes.reduce((a, b) => a + b, 0);
const flops = 2 * R * K * N;
const $ = (id) => document.getElementById(id);
$('env').textContent = `crossOriginIsolated=${crossOriginIsolated}, hardwareConcurrency=${navigator.hardwareConcurrency}, WebGPU=${Boolean(navigator.gpu)}; E=${E}, ${R} routed rows, K=${K}, N=${N}`;

function bars(values, labels, unit) {
  const w = 640, h = 26 * values.length + 10, max = Math.max(...values, 1e-9);
  const rows = values.map((v, i) => {
    const y = 5 + i * 26, bw = Math.max(1, (v / max) * (w - 230));
    return `<text x="0" y="${y + 17}" font-size="13">${labels[i]}</text><rect x="120" y="${y}" width="${bw}" height="20" fill="#4a7bd0"></rect><text x="${125 + bw}" y="${y + 15}" font-size="12">${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}</text>`;
  });
  return `<svg width="${w}" height="${h}" xmlns="http://www.w3.org/2000/svg">${rows.join('')}</svg>`;
}

$('sizes').innerHTML = bars(sizes, sizes.map((_, e) => `expert ${e}`), 'rows');

async function run(threads) {
  const eng = await Engine.create({ threads });
  const strm = new Stream(eng);
  const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const userMd = memory.desc([E, K, N], dt.f32, tag.abc);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], dt.f32, tag.any), dstMd);
  const src = Memory.create(srcMd, eng), user = Memory.create(userMd, eng), wei = Memory.create(pd.queryMd('weights'), eng);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  src.values.forEach((_, i, a) => { a[i] = Math.sin(i * 0.001); });
  user.values.forEach((_, i, a) => { a[i] = Math.cos(i * 0.0007) / 32; });
  offsets.fromSizes(sizes, src.offsets);
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, userMd, wei.desc)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei });
  const mm = new matmul.Primitive(pd);
  const times = [];
  for (let i = 0; i < 7; i++) {
    const t0 = performance.now();
    mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    if (i > 1) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const ms = times[times.length >> 1];
  // float64 check of a few rows
  let worst = 0, row = 0;
  const x = src.values, w = user.values, y = dst.values;
  sizes.forEach((m, e) => {
    for (let r = row; r < row + m; r += 37)
      for (let n = 0; n < N; n += 101) {
        let ref = 0, mag = 0;
        for (let k = 0; k < K; k++) { const p = x[r * K + k] * w[(e * K + k) * N + n]; ref += p; mag += Math.abs(p); }
        worst = Math.max(worst, Math.abs(y[r * N + n] - ref) / mag);
      }
    row += m;
  });
  const out = { threads: eng.threads, impl: pd.implInfo, ms, gflops: flops / ms / 1e6, err: worst };
  mm.destroy();
  eng.release();
  return out;
}

/** The same grouped matmul on the gpu engine (offsets on the device; plain weights: no gpu packing yet). */
async function runGpu() {
  const eng = await Engine.create({ kind: 'gpu' });
  const strm = new Stream(eng);
  const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
  const x = Float32Array.from({ length: R * K }, (_, i) => Math.sin(i * 0.001));
  const w = Float32Array.from({ length: E * K * N }, (_, i) => Math.cos(i * 0.0007) / 32);
  const src = Memory.create(srcMd, eng).write(x).writeOffsets(offsets.fromSizes(sizes));
  const wei = Memory.create(weiMd, eng).write(w);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  const mm = new matmul.Primitive(pd);
  // A software adapter (SwiftShader, lavapipe: what headless CI has) takes tens of seconds per run:
  // one run there, shader compile included, and the row says so.
  const software = /swiftshader|llvmpipe|lavapipe/i.test(eng.adapterInfo);
  const times = [];
  for (let i = 0; i < (software ? 1 : 5); i++) {
    const t0 = performance.now();
    mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    if (software || i > 0) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const ms = times[times.length >> 1];
  const y = await dst.read();
  let worst = 0, row = 0;
  sizes.forEach((m, e) => {
    for (let r = row; r < row + m; r += 37)
      for (let n = 0; n < N; n += 101) {
        let ref = 0, mag = 0;
        for (let k = 0; k < K; k++) { const p = x[r * K + k] * w[(e * K + k) * N + n]; ref += p; mag += Math.abs(p); }
        worst = Math.max(worst, Math.abs(y[r * N + n] - ref) / mag);
      }
    row += m;
  });
  const out = { threads: 'gpu', impl: `${pd.implInfo} (${eng.adapterInfo}${software ? '; software adapter: one run, compile included' : ''})`, ms, gflops: flops / ms / 1e6, err: worst };
  mm.destroy();
  eng.release();
  return out;
}

function addRow(r) {
  const tr = document.createElement('tr');
  tr.setAttribute('data-gflops', String(r.gflops));
  tr.setAttribute('data-err', String(r.err));
  if (r.threads === 'gpu') tr.setAttribute('data-engine', 'gpu');
  tr.innerHTML = `<td>${r.threads}</td><td>${r.impl}</td><td>${r.ms.toFixed(1)}</td><td>${r.gflops.toFixed(1)}</td><td>${r.err.toExponential(1)}</td>`;
  $('table').appendChild(tr);
}

const label = (x) => (x.threads === 'gpu' ? 'gpu engine' : `${x.threads} thread${x.threads > 1 ? 's' : ''}`);
const results = [];
for (const threads of [...new Set([1, Math.max(2, Math.min(navigator.hardwareConcurrency || 2, 8))])]) {
  const r = await run(threads);
  results.push(r);
  addRow(r);
  $('perf').innerHTML = bars(results.map((x) => x.gflops), results.map(label), 'GFLOP/s');
}
if (navigator.gpu) {
  try {
    const r = await runGpu();
    results.push(r);
    addRow(r);
    $('perf').innerHTML = bars(results.map((x) => x.gflops), results.map(label), 'GFLOP/s');
  } catch (e) {
    // navigator.gpu without an adapter (e.g. GPU disabled): say so instead of a row.
    const tr = document.createElement('tr');
    tr.setAttribute('data-engine-unavailable', 'gpu');
    tr.innerHTML = `<td>gpu</td><td colspan="4">${String(e && e.message || e).slice(0, 160)}</td>`;
    $('table').appendChild(tr);
  }
}

// A whole MoE layer (moe.layer: route -> dispatch -> GEMM1 + SwiGLU -> GEMM2 -> combine), plain f32
// weights, on the cpu engine and, where the page has WebGPU, on the gpu engine (every stage on the device).
const L = { T: 32, E: 8, k: 2, K: 256, I: 128 };
const layerData = {
  hidden: Float32Array.from({ length: L.T * L.K }, (_, i) => Math.sin(i * 0.37)),
  logits: Float32Array.from({ length: L.T * L.E }, (_, i) => Math.cos(i * 1.3) * 3),
  w13: Float32Array.from({ length: L.E * L.K * 2 * L.I }, (_, i) => Math.sin(i * 0.0013) / 16),
  w2: Float32Array.from({ length: L.E * L.I * L.K }, (_, i) => Math.cos(i * 0.0017) / 16),
};

async function runLayer(eng) {
  const strm = new Stream(eng);
  const weights = { w13: memory.desc([L.E, L.K, 2 * L.I], dt.f32, tag.abc), w2: memory.desc([L.E, L.I, L.K], dt.f32, tag.abc) };
  const pd = new moe.layer.PrimitiveDesc(eng, { tokens: L.T, hidden: L.K, intermediate: L.I, experts: L.E, topK: L.k, routing: { renormalize: true }, weights });
  const layer = new moe.layer.Primitive(pd);
  const m = (md, v) => Memory.create(md, eng).write(v);
  const out = Memory.create(pd.queryMd('dst'), eng);
  const args = {
    [ARG.SRC]: m(pd.queryMd('hidden'), layerData.hidden), [ARG.MOE_ROUTER_LOGITS]: m(pd.queryMd('logits'), layerData.logits),
    [ARG.WEIGHTS]: m(weights.w13, layerData.w13), [ARG.WEIGHTS_1]: m(weights.w2, layerData.w2), [ARG.DST]: out,
  };
  const software = eng.kind === 'gpu' && /swiftshader|llvmpipe|lavapipe/i.test(eng.adapterInfo);
  const times = [];
  for (let i = 0; i < (software ? 2 : 7); i++) {
    const t0 = performance.now();
    layer.execute(strm, args);
    await strm.wait();
    if (i > 0) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const y = Float32Array.from(await out.read());
  const impl = layer.stages.map((st) => `${st.name}: ${st.implInfo}`).join(', ');
  layer.destroy();
  eng.release();
  return { ms: times[times.length >> 1], y, impl };
}

function addLayerRow(kind, r, err) {
  const tr = document.createElement('tr');
  tr.setAttribute('data-layer-engine', kind);
  tr.setAttribute('data-err', String(err));
  tr.innerHTML = `<td>${kind}</td><td>${r.impl}</td><td>${r.ms.toFixed(2)}</td><td>${err.toExponential(1)}</td>`;
  $('layer').appendChild(tr);
}

const cpuLayer = await runLayer(await Engine.create({ threads: 1 }));
addLayerRow('cpu', cpuLayer, 0);
if (navigator.gpu) {
  try {
    const g = await runLayer(await Engine.create({ kind: 'gpu' }));
    const amax = cpuLayer.y.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    addLayerRow('gpu', g, g.y.reduce((a, v, i) => Math.max(a, Math.abs(v - cpuLayer.y[i])), 0) / amax);
  } catch (e) {
    const tr = document.createElement('tr');
    tr.setAttribute('data-layer-engine-unavailable', 'gpu');
    tr.innerHTML = `<td>gpu</td><td colspan="3">${String(e && e.message || e).slice(0, 200)}</td>`;
    $('layer').appendChild(tr);
  }
}
