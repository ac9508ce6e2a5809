// Issue 19 (accumulation_mode relaxed): the bare 1 row x 16 column decode kernels on L1-resident operands,
// strict (ukernel_lowp16: f32_gemm_1x16w8 / w4) vs relaxed (ukernel_relaxed16: f32_gemm_1x16r8 / r4), one
// module, samples interleaved, process CPU time. Usage: node reports/issue19-relaxed-kernel-l1.mjs simd128|relaxed [reps]
// (relaxed on Node 22+). Prints best-of-15 rates (G weights/s) and the median per-round strict / relaxed ratio.
import fs from 'node:fs';
const isa = process.argv[2] ?? 'simd128';
const kc = 256, reps = Number(process.argv[3] ?? 10000);
const memory = new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true });
const { instance } = await WebAssembly.instantiate(fs.readFileSync(new URL(`../wasm/build/groupdnn-${isa}.wasm`, import.meta.url)), { env: { memory } });
const ex = instance.exports;
ex.__stack_pointer.value = 65536;
const base = (ex.__heap_base.value + 4095) & ~4095;
const a = base, w = base + 65536, c = base + 3 * 65536, sq = c + 1024, xd = base + 4 * 65536;
const f = new Float32Array(memory.buffer);
for (let i = 0; i < 4 * kc; i++) f[a / 4 + i] = Math.sin(i);
const u8 = new Uint8Array(memory.buffer);
for (let i = 0; i < 2 * 8 * kc; i++) u8[w + i] = (i * 73 + 11) & 255;
for (let i = 0; i < 16; i++) f[sq / 4 + i] = 1 + i / 16;
const names = { 3: 's8', 4: 'u8', 5: 's4', 6: 'u4' };
const res = {};
for (let round = 0; round < 15; round++)
  for (const dt of [3, 5, 6]) for (const sc of [0, 1]) for (const which of ['strict', 'relaxed']) {
    const ps = dt === 5 || dt === 6 ? 4 * kc : 8 * kc;
    const c0 = process.cpuUsage();
    (which === 'strict' ? ex.ukernel_lowp16 : ex.ukernel_relaxed16)(reps, kc, dt, a, w, ps, c, sc ? sq : 0, xd);
    const cu = process.cpuUsage(c0);
    ((res[`${names[dt]}${sc ? '+s' : ''}`] ??= { strict: [], relaxed: [] })[which]).push((cu.user + cu.system) / 1000);
  }
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
for (const [k, v] of Object.entries(res)) {
  const gw = (t) => (16 * kc * reps / Math.min(...t) / 1e6).toFixed(2);
  console.log(process.version, isa, k.padEnd(5), 'strict', gw(v.strict), 'relaxed', gw(v.relaxed), 'G weights/s; median strict/relaxed', med(v.strict.map((s, i) => s / v.relaxed[i])).toFixed(2));
}
