// Browser demo (npm run serve, then open /examples/browser/): one MoE layer's expert GEMM (E=8, top-2,
// skewed routing with an empty expert) through the grouped matmul at 1 and N threads, with per-expert
// sizes and GFLOP/s drawn as SVG bar charts; where the page has WebGPU (navigator.gpu), a third row runs
// the same matmul on the gpu engine. Uses dist/ as shipped (npm run build).
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, reorder, tag } from 'groupdnn';

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
