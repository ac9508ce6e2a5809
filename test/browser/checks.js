// Runs in headless Chromium (test/browser.test.ts): the library as shipped (dist/), unbundled, from a
// static server. Each check records { name, ok, detail } in window.__results; window.__done at the end.
const results = [];
window.__results = results;
const record = (name, ok, detail = '') => results.push({ name, ok: Boolean(ok), detail: String(detail) });

async function check(name, fn) {
  try {
    const detail = await fn();
    record(name, true, detail);
  } catch (e) {
    record(name, false, e && e.stack ? e.stack : String(e));
  }
}

const g = await import('groupdnn'); // the page's import map: /dist/index.js
const { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag, DnnlError } = g;

/** Grouped matmul vs a float64 loop (random data, an empty expert, K and N not multiples of the tiles). */
async function groupedMatmul(threads) {
  const eng = await Engine.create({ threads });
  const strm = new Stream(eng);
  const E = 5, K = 70, N = 37, sizes = [9, 0, 30, 1, 7], R = 47;
  const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
  const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
  const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  const x = src.values, w = wei.values;
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37);
  for (let i = 0; i < w.length; i++) w[i] = Math.cos(i * 0.11) / 8;
  offsets.fromSizes(sizes, src.offsets);
  mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  await strm.wait();
  let worst = 0, row = 0;
  sizes.forEach((m, e) => {
    for (let r = row; r < row + m; r++)
      for (let n = 0; n < N; n++) {
        let ref = 0, mag = 0;
        for (let k = 0; k < K; k++) { const p = x[r * K + k] * w[(e * K + k) * N + n]; ref += p; mag += Math.abs(p); }
        worst = Math.max(worst, Math.abs(dst.values[r * N + n] - ref) / mag);
      }
    row += m;
  });
  const info = `threads=${eng.threads} isa=${eng.isa} impl=${mm.pd.implInfo} maxRelErr=${worst.toExponential(1)}`;
  mm.destroy();
  eng.release();
  if (!(worst < 1e-5)) throw new Error(`wrong result: ${info}`);
  return info;
}

await check('cross-origin isolated', () => {
  if (!crossOriginIsolated) throw new Error('page is not cross-origin isolated');
  return `hardwareConcurrency=${navigator.hardwareConcurrency}`;
});
await check('engine + grouped matmul, 1 thread', () => groupedMatmul(1));
await check('engine + grouped matmul, 2 threads (module workers)', () => groupedMatmul(2));
await check('a worker that fails to load rejects Engine.create', async () => {
  const broken = await import('/broken-dist/index.js');
  const t0 = performance.now();
  try {
    const eng = await broken.Engine.create({ threads: 2, startTimeoutMs: 8000 });
    eng.release();
  } catch (e) {
    if (!(e instanceof broken.DnnlError) || e.status !== 'runtime_error') throw new Error(`expected a DnnlError(runtime_error), got ${e}`);
    return `${(performance.now() - t0).toFixed(0)} ms: ${e.message}`;
  }
  throw new Error('Engine.create resolved with a worker that cannot load');
});
await check('free during an in-flight job is deferred; destroy() gives the heap back', async () => {
  const eng = await Engine.create({ threads: 2 });
  const strm = new Stream(eng);
  const R = 64, K = 256, N = 256, E = 2;
  const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
  const start = eng.heap.usedBytes;
  const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
  const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng);
  src.values.fill(1); wei.values.fill(1);
  offsets.fromSizes([40, 24], src.offsets);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  dst.free();
  const fresh = Memory.create(memory.desc([R, N], dt.f32, tag.ab), eng);
  fresh.values.fill(-1);
  await strm.wait();
  if (!fresh.values.every((v) => v === -1)) throw new Error('the job wrote into memory allocated after it was enqueued');
  fresh.free(); src.free(); wei.free(); mm.destroy();
  await eng.idle();
  const back = eng.heap.usedBytes;
  eng.release();
  if (back > start + (1 << 20)) throw new Error(`heap did not come back: ${start} -> ${back}`);
  return `heap ${start} -> ${back} bytes (kernel scratch kept)`;
});
await check('bad input is a DnnlError', async () => {
  const eng = await Engine.create({ threads: 1 });
  try {
    new matmul.PrimitiveDesc(eng, memory.desc([4, 8], dt.f32, tag.ab), memory.desc([9, 4], dt.f32, tag.ab), memory.desc([4, 4], dt.f32, tag.ab));
  } catch (e) {
    eng.release();
    if (e instanceof DnnlError && e.status === 'invalid_arguments') return e.message;
    throw e;
  }
  throw new Error('no error');
});
window.__done = true;
