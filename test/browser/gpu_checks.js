// Checks of the gpu engine in a browser page (navigator.gpu; SwiftShader in CI), on dist/ unbundled.
/* global GPUBufferUsage */
// `run()` returns [{ name, ok, detail }]; test/browser.test.ts asserts each. Values are checked against
// a float64 loop written here, independent of the library.
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, matmul, memory, tag } from '/dist/index.js';

const SENTINEL = 12345;

/** Small integers / 8: exact in f32, so an f32 GEMM of them matches the float64 loop to rounding. */
function values(n, seed) {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (((s >>> 24) % 17) - 8) / 8;
  }
  return out;
}

/** Largest |got - want| over rows [0, rows) of an [rows, N] result, want = x[rows, K] * w[K, N] in float64. */
function maxError(got, x, w, rows, K, N) {
  let err = 0;
  for (let r = 0; r < rows; r++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += x[r * K + k] * w[k * N + n];
      err = Math.max(err, Math.abs(got[r * N + n] - s));
    }
  }
  return err;
}

/** A caller's GPUBuffer of `rows` rows of `cols` f32 values, filled with `init` (rounded up to 16 bytes). */
function rowsBuffer(eng, rows, cols, init) {
  const bytes = Math.max(16, Math.ceil((rows * cols * 4) / 16) * 16);
  const b = eng.device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  const data = new Float32Array(bytes / 4);
  data.set(init.subarray(0, Math.min(init.length, data.length)));
  eng.device.queue.writeBuffer(b, 0, data);
  return b;
}

async function groupedGemm(eng, strm) {
  // Experts of different K and N; expert 1 is empty; every buffer holds one row more than M_i.
  const experts = [{ K: 5, N: 7, rows: 3 }, { K: 9, N: 3, rows: 0 }, { K: 33, N: 70, rows: 20 }];
  const rowsMd = (cols) => memory.desc([RUNTIME_DIM_VAL, cols], dt.f32, tag.ab);
  const dimsMd = memory.desc([experts.length], dt.s32, tag.x);
  const pd = new grouped_gemm.PrimitiveDesc(eng, experts.map((e) => rowsMd(e.K)), experts.map((e) => memory.desc([e.K, e.N], dt.f32, tag.ab)), experts.map((e) => rowsMd(e.N)), dimsMd);
  const prim = new grouped_gemm.Primitive(pd);
  const args = {};
  const data = experts.map((e, i) => {
    const cap = e.rows + 1;
    const x = values(cap * e.K, 10 + i), w = values(e.K * e.N, 20 + i);
    const dst = rowsBuffer(eng, cap, e.N, new Float32Array(cap * e.N).fill(SENTINEL));
    args[ARG.MULTIPLE_SRC + i] = Memory.create(rowsMd(e.K), eng, rowsBuffer(eng, cap, e.K, x));
    args[ARG.MULTIPLE_WEIGHTS + i] = Memory.create(pd.queryMd('weights', i), eng).write(w);
    args[ARG.MULTIPLE_DST + i] = Memory.create(rowsMd(e.N), eng, dst);
    return { x, w };
  });
  const dims = Memory.create(dimsMd, eng).write(experts.map((e) => e.rows));
  args[ARG.RUNTIME_DIMS] = dims;
  prim.execute(strm, args);
  await strm.wait();
  let err = 0, sentinelOk = true;
  for (let i = 0; i < experts.length; i++) {
    const e = experts[i];
    const got = new Float32Array((await args[ARG.MULTIPLE_DST + i].readBytes(0)).buffer);
    err = Math.max(err, maxError(got, data[i].x, data[i].w, e.rows, e.K, e.N));
    for (let j = e.rows * e.N; j < (e.rows + 1) * e.N; j++) sentinelOk &&= got[j] === SENTINEL;
  }
  // Rows above an expert's capacity: found on the device, raised at wait(), nothing written.
  dims.write([3, 0, 22]);
  prim.execute(strm, args);
  let refusal = '';
  try {
    await strm.wait();
  } catch (e) {
    refusal = String(e.message);
  }
  return {
    name: 'grouped_gemm (Proposal #3) on the gpu engine',
    ok: err <= 1e-4 && sentinelOk && refusal.includes("ARG.RUNTIME_DIMS[2] = 22 rows do not fit expert 2's src/dst allocations (21 rows fit)"),
    detail: `implInfo=${pd.implInfo} maxErr=${err} sentinel=${sentinelOk} refusal=${refusal}`,
  };
}

async function groupedMatmul(eng, strm) {
  // Proposal #1: grouped src/dst sharing one offsets buffer on the device.
  const sizes = [4, 0, 9, 2], G = sizes.length, K = 17, N = 65, M = 15;
  const offs = [0];
  for (const s of sizes) offs.push(offs[offs.length - 1] + s);
  const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([M, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([G, K, N], dt.f32, tag.abc);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
  const x = values(M * K, 3), w = values(G * K * N, 4);
  const src = Memory.create(srcMd, eng).write(x).writeOffsets(offs);
  const wei = Memory.create(weiMd, eng).write(w);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  await strm.wait();
  const got = await dst.read();
  let err = 0;
  for (let g = 0; g < G; g++) {
    err = Math.max(err, maxError(got.subarray(offs[g] * N), x.subarray(offs[g] * K), w.subarray(g * K * N), sizes[g], K, N));
  }
  return { name: 'grouped matmul (Proposal #1) on the gpu engine', ok: err <= 1e-4, detail: `implInfo=${pd.implInfo} maxErr=${err}` };
}

export async function run() {
  const results = [];
  let eng;
  try {
    eng = await Engine.create({ kind: 'gpu' });
    results.push({ name: 'gpu engine from navigator.gpu', ok: eng.kind === 'gpu' && eng.source === 'navigator.gpu', detail: `${eng.source}: ${eng.adapterInfo}` });
    const strm = new Stream(eng);
    for (const check of [groupedGemm, groupedMatmul]) {
      try {
        results.push(await check(eng, strm));
      } catch (e) {
        results.push({ name: check.name, ok: false, detail: String(e && e.stack || e) });
      }
    }
  } catch (e) {
    results.push({ name: 'gpu engine from navigator.gpu', ok: false, detail: String(e && e.stack || e) });
  } finally {
    eng?.release();
  }
  return results;
}
