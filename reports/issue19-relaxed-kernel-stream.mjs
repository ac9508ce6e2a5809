// Issue 19 (session 10): the relaxed 1x16 kernels walking 24 experts x 176 panels x 2048 k of s4 (or s8) codes (34.6 /
// 69 MB, evicted by a 256 MB pass before each sample) as the decode workload streams them, with and without reading the
// next call's two panels ahead inside the loop (session 10 experiment, not kept: this script now runs the kept
// kernels only), against stream_f32 reading the same bytes; process CPU time.
// Usage: node reports/issue19-relaxed-kernel-stream.mjs simd128|relaxed [s4|s8]
import fs from 'node:fs';
const isa = process.argv[2] ?? 'simd128', dtName = process.argv[3] ?? 's4';
const dtc = dtName === 's8' ? 3 : 5, bpk = dtName === 's8' ? 8 : 4;
const kc = 2048, npan = 176, experts = 24;
const memory = new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true });
const { instance } = await WebAssembly.instantiate(fs.readFileSync(new URL(`../wasm/build/groupdnn-${isa}.wasm`, import.meta.url)), { env: { memory } });
const ex = instance.exports;
ex.__stack_pointer.value = 65536;
const base = (ex.__heap_base.value + 4095) & ~4095;
const xd = base, xs = base + 65536, c = base + 2 * 65536, w = base + 4 * 65536;
const ebytes = npan * bpk * kc, total = ebytes * experts;
const big = w + total + 4096, bigBytes = 256 << 20;
memory.grow(Math.ceil((big + bigBytes - memory.buffer.byteLength) / 65536) + 1);
const f = new Float32Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
for (let i = 0; i < 2 * kc; i++) f[xd / 4 + i] = Math.sin(i);
for (let i = 0; i < total; i++) u8[w + i] = (i * 73 + 11) & 255;
const res = { relaxed: [], stream: [] };
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
for (let round = 0; round < 11; round++) for (const which of ['relaxed', 'stream']) {
  ex.stream_f32(big, bigBytes / 4);
  const t0 = cpu();
  for (let e = 0; e < experts; e++) {
    if (which === 'stream') ex.stream_f32(w + e * ebytes, ebytes / 4);
    else ex.stream_relaxed16(npan, kc, dtc, xd, xs, w + e * ebytes, c);
  }
  res[which].push(cpu() - t0);
}
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
for (const [k, v] of Object.entries(res)) console.log(process.version, isa, dtName, k.padEnd(6), `median ${med(v).toFixed(2)} ms`, `${(total / med(v) / 1e6).toFixed(2)} GB/s`);
console.log('median per-round relaxed / stream', med(res.relaxed.map((p, i) => p / res.stream[i])).toFixed(3));
