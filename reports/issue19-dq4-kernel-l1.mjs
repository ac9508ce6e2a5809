// Issue 19 (session 8): the 1-row x4 integer decode kernels on L1-resident operands, the former (s16_gemm_3x8w4 per
// panel) and s16_dq_1x16w4 (2 panels), s4 (dt 5) and u4 (dt 6): checks their int32 sums are equal, then medians of
// 11 interleaved samples by CPU time. Usage: node reports/issue19-dq4-kernel-l1.mjs simd128|relaxed [reps] [kc]
import fs from 'node:fs';
const isa = process.argv[2] ?? 'simd128';
const kc = Number(process.argv[4] ?? 256), reps = Number(process.argv[3] ?? 20000);
const memory = new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true });
const { instance } = await WebAssembly.instantiate(fs.readFileSync(new URL(`../wasm/build/groupdnn-${isa}.wasm`, import.meta.url)), { env: { memory } });
const ex = instance.exports;
ex.__stack_pointer.value = 65536;
const base = (ex.__heap_base.value + 4095) & ~4095;
const a3 = base, aq = base + 65536, xs = aq + 16384, w = base + 2 * 65536, c = base + 4 * 65536, c2 = c + 1024;
const i16 = new Int16Array(memory.buffer), i32 = new Int32Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
for (let t = 0; t < kc / 2; t++) for (let r = 0; r < 3; r++) { i16[a3 / 2 + 2 * (3 * t + r)] = ((t * 37 + r * 11) % 255) - 127; i16[a3 / 2 + 2 * (3 * t + r) + 1] = ((t * 91 + 5 + r) % 255) - 127; }

ex.quad_row(a3, aq, kc, 0, xs);
for (let i = 0; i < 2 * 4 * kc; i++) u8[w + i] = (i * 73 + 11) & 255;
const ps = 4 * kc;
const res = {};
for (const dt of [5, 6]) {
  ex.ukernel_dq4(1, kc, dt, 0, a3, xs, w, ps, c);
  ex.ukernel_dq4(1, kc, dt, 1, aq, xs, w, ps, c2);
  const o = Array.from(i32.subarray(c / 4, c / 4 + 16)), n = Array.from(i32.subarray(c2 / 4, c2 / 4 + 16));
  console.log('dt', dt, 'equal', JSON.stringify(o) === JSON.stringify(n), o.slice(0, 4), n.slice(0, 4));
}
for (let round = 0; round < 11; round++) for (const dt of [5, 6]) for (const neu of [0, 1]) {
  const c0 = process.cpuUsage();
  ex.ukernel_dq4(reps, kc, dt, neu, neu ? aq : a3, xs, w, ps, c);
  const cu = process.cpuUsage(c0);
  ((res[dt] ??= [[], []])[neu]).push((cu.user + cu.system) / 1000);
}
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
for (const [dt, [o, n]] of Object.entries(res)) console.log(process.version, isa, dt == 5 ? 's4' : 'u4', 'old', (16 * kc * reps / med(o) / 1e6).toFixed(2), 'new', (16 * kc * reps / med(n) / 1e6).toFixed(2), 'Gw/s (median); old/new', (med(o) / med(n)).toFixed(2));
