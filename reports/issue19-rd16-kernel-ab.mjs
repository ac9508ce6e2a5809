// Issue 19 (session 25): the 1-row x4 `:dq` decode kernel on relaxed SIMD's i16x8 dot (s8_dq_1x16w4r, "rd16") vs the
// SIMD128 int16 one (s16_dq_1x16w4, "quad"), relaxed build, s4 (dt 5) and u4 (dt 6): checks their int32 sums are equal,
// then medians of 11 interleaved samples by CPU time, L1-resident (2 panels x kc k, reps calls) and streamed from
// memory (24 experts x 176 panels x 2048 k, 34.6 MB, evicted by a 256 MB pass before each sample), with stream_f32
// reading the same bytes. Usage: node reports/issue19-rd16-kernel-ab.mjs [reps] [kc]   (Node 22+)
import fs from 'node:fs';
const kc = Number(process.argv[3] ?? 256), reps = Number(process.argv[2] ?? 20000);
const memory = new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true });
const { instance } = await WebAssembly.instantiate(fs.readFileSync(new URL('../wasm/build/groupdnn-relaxed.wasm', import.meta.url)), { env: { memory } });
const ex = instance.exports;
ex.__stack_pointer.value = 65536;
const base = (ex.__heap_base.value + 4095) & ~4095;
const KS = 2048, npan = 176, experts = 24, ebytes = npan * 4 * KS, total = ebytes * experts;
const a3 = base, aq = base + 65536, xs = aq + 16384, ar = base + 2 * 65536, xr = ar + 32768, c = base + 4 * 65536, c2 = c + 8192;
const w = base + 8 * 65536, sw = w + 65536, big = sw + total + 4096, bigBytes = 256 << 20;
memory.grow(Math.ceil((big + bigBytes - memory.buffer.byteLength) / 65536) + 1);
const i16 = new Int16Array(memory.buffer), i32 = new Int32Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
for (let t = 0; t < KS / 2; t++) { i16[a3 / 2 + 6 * t] = ((t * 37) % 256) - 128; i16[a3 / 2 + 6 * t + 1] = ((t * 91 + 5) % 255) - 127; }
for (let i = 0; i < 2 * 4 * kc; i++) u8[w + i] = (i * 73 + 11) & 255;
for (let i = 0; i < total; i++) u8[sw + i] = (i * 73 + 11) & 255;
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
for (const K of [kc, KS]) {
  ex.quad_row(a3, aq, K, 0, xs);
  ex.rd16_row(a3, ar, K, 0, xr);
  for (const dt of [5, 6]) {
    const W = K === kc ? w : sw;
    ex.ukernel_dq4(1, K, dt, 1, aq, xs, W, 4 * K, c);
    ex.ukernel_dq4(1, K, dt, -1, ar, xr, W, 4 * K, c2);
    const o = Array.from(i32.subarray(c / 4, c / 4 + 16)), n = Array.from(i32.subarray(c2 / 4, c2 / 4 + 16));
    if (JSON.stringify(o) !== JSON.stringify(n)) throw new Error(`K ${K} dt ${dt}: sums differ ${o} vs ${n}`);
  }
}
ex.quad_row(a3, aq, kc, 0, xs);
ex.rd16_row(a3, ar, kc, 0, xr);
const l1 = {};
for (let round = 0; round < 11; round++) for (const dt of [5, 6]) for (const neu of [1, -1]) {
  const t0 = cpu();
  ex.ukernel_dq4(reps, kc, dt, neu, neu === 1 ? aq : ar, neu === 1 ? xs : xr, w, 4 * kc, c);
  ((l1[dt] ??= {})[neu] ??= []).push(cpu() - t0);
}
for (const dt of [5, 6]) console.log(process.version, 'L1', dt === 5 ? 's4' : 'u4', `kc ${kc}`, 'quad', (16 * kc * reps / med(l1[dt][1]) / 1e6).toFixed(2), 'rd16', (16 * kc * reps / med(l1[dt][-1]) / 1e6).toFixed(2), 'G weights/s (median); rd16 speed-up', (med(l1[dt][1]) / med(l1[dt][-1])).toFixed(2));
ex.quad_row(a3, aq, KS, 0, xs);
ex.rd16_row(a3, ar, KS, 0, xr);
const st = { quad: [], rd16: [], stream: [] };
for (let round = 0; round < 9; round++) for (const which of ['quad', 'rd16', 'stream']) {
  ex.stream_f32(big, bigBytes / 4);
  const t0 = cpu();
  for (let e = 0; e < experts; e++) {
    if (which === 'stream') ex.stream_f32(sw + e * ebytes, ebytes / 4);
    else if (which === 'quad') ex.stream_dq4(npan, KS, 5, 1, aq, xs, sw + e * ebytes, c);
    else ex.stream_dq4(npan, KS, 5, -1, ar, xr, sw + e * ebytes, c);
  }
  st[which].push(cpu() - t0);
}
const gb = (ms) => (total / ms / 1e6).toFixed(2);
console.log(process.version, 'memory s4', 'quad', gb(med(st.quad)), 'rd16', gb(med(st.rd16)), 'plain read', gb(med(st.stream)), 'GB/s of codes (median); rd16 speed-up', (med(st.quad) / med(st.rd16)).toFixed(2), '; x the plain read: quad', (med(st.quad) / med(st.stream)).toFixed(2), 'rd16', (med(st.rd16) / med(st.stream)).toFixed(2));
