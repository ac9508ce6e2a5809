/**
 * Grouped matmul backward (P#1 grouped memory): the forward dst[g] = src[g] x W[g] + b[g], then
 * diff_src, diff_weights and diff_bias for a loss L = sum(dst * dy), checked against a central finite
 * difference of the forward for one weight. Run: `npx tsx examples/matmul_backward.ts`.
 */
import {
  ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, matmul_backward_data, matmul_backward_weights, memory, offsets, reorder, tag,
} from 'groupdnn';

const E = 4, K = 37, N = 13, sizes = [5, 0, 17, 9], M = 31;
const eng = await Engine.create({ threads: 2 });
const strm = new Stream(eng);
const rows = (cols: number): ReturnType<typeof memory.desc.grouped> => memory.desc.grouped([M, cols], dt.f32, E, [RUNTIME_DIM_VAL, cols]);
const wMd = memory.desc([E, K, N], dt.f32, tag.abc), bMd = memory.desc([E, N], dt.f32, tag.ab);

const fwdPd = new matmul.PrimitiveDesc(eng, rows(K), wMd, bMd, rows(N));
// Backward data reads W^T from packed f32:p8t panels (tag.any), made once per weights update by a reorder.
const dataPd = new matmul_backward_data.PrimitiveDesc(eng, rows(K), memory.desc([E, K, N], dt.f32, tag.any), rows(N), fwdPd);
const wPd = new matmul_backward_weights.PrimitiveDesc(eng, rows(K), wMd, rows(N), fwdPd, undefined, bMd);

const x = Memory.create(rows(K), eng), y = Memory.create(rows(N), eng, [undefined, x.handles[1]]);
const dy = Memory.create(rows(N), eng, [undefined, x.handles[1]]), dx = Memory.create(rows(K), eng, [undefined, x.handles[1]]);
const w = Memory.create(wMd, eng), b = Memory.create(bMd, eng), dw = Memory.create(wMd, eng), db = Memory.create(bMd, eng);
const wT = Memory.create(dataPd.queryMd('weights')!, eng);
offsets.fromSizes(sizes, x.offsets); // one offsets buffer shared by x, y, dy, dx
const rnd = (n: number): number[] => Array.from({ length: n }, (_, i) => Math.sin(i * 12.9898) * 0.5);
x.write(rnd(M * K));
w.write(rnd(E * K * N).reverse());
b.write(rnd(E * N));
dy.write(rnd(M * N).map((v) => v * 2));

new reorder.Primitive(new reorder.PrimitiveDesc(eng, wMd, wT.desc)).execute(strm, { [ARG.FROM]: w, [ARG.TO]: wT });
new matmul_backward_data.Primitive(dataPd).execute(strm, { [ARG.DIFF_DST]: dy, [ARG.WEIGHTS]: wT, [ARG.DIFF_SRC]: dx });
new matmul_backward_weights.Primitive(wPd).execute(strm, { [ARG.SRC]: x, [ARG.DIFF_DST]: dy, [ARG.DIFF_WEIGHTS]: dw, [ARG.DIFF_BIAS]: db });
await strm.wait();

// Central difference of L through the forward for one weight of expert 2 (it has 17 rows).
const fwd = new matmul.Primitive(fwdPd);
const loss = async (): Promise<number> => {
  fwd.execute(strm, { [ARG.SRC]: x, [ARG.WEIGHTS]: w, [ARG.BIAS]: b, [ARG.DST]: y });
  await strm.wait();
  const yv = Array.from(y.read()), dv = dy.read();
  return yv.reduce((s, v, i) => s + v * dv[i], 0);
};
const idx = (2 * K + 7) * N + 3, h = 2 ** -6, wv = w.values as Float32Array, keep = wv[idx];
wv[idx] = keep + h;
const up = await loss();
wv[idx] = keep - h;
const down = await loss();
wv[idx] = keep;
console.log(`diff_weights[2, 7, 3] = ${dw.read()[idx].toFixed(6)}, central difference = ${((up - down) / (2 * h)).toFixed(6)}`);
console.log(`diff_src[0, 0] = ${dx.read()[0].toFixed(6)}, diff_bias[1] (an expert without rows) = [${[...db.read().subarray(N, 2 * N)].join(', ')}]`);
console.log(`impls: ${dataPd.implInfo} / ${wPd.implInfo}`);
eng.release();
