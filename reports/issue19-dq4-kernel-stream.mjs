// Issue 19 (session 8): the same kernels walking 24 experts x 176 panels x 2048 k of s4 codes (34.6 MB, evicted by a
// 256 MB pass before each sample) as the decode workload streams them, against stream_f32 reading the same bytes.
// Usage: node reports/issue19-dq4-kernel-stream.mjs simd128|relaxed
import fs from 'node:fs';
const isa = process.argv[2] ?? 'simd128';
const kc = 2048, npan = 176, experts = 24; // 24 experts x 176 panels x 8 KB = 34.6 MB, like the decode workload
const memory = new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true });
const { instance } = await WebAssembly.instantiate(fs.readFileSync(process.env.WASM ?? new URL(`../wasm/build/groupdnn-${isa}.wasm`, import.meta.url)), { env: { memory } });
const ex = instance.exports;
ex.__stack_pointer.value = 65536;
const base = (ex.__heap_base.value + 4095) & ~4095;
const a3 = base, aq = base + 65536, xs = aq + 16384, c = base + 2 * 65536, w = base + 4 * 65536;
const ebytes = npan * 4 * kc, total = ebytes * experts;
const big = w + total + 4096, bigBytes = 256 << 20; // 256 MB eviction buffer
memory.grow(Math.ceil((big + bigBytes - memory.buffer.byteLength) / 65536) + 1);
const i16 = new Int16Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
for (let t = 0; t < kc / 2; t++) { i16[a3 / 2 + 6 * t] = (t * 37 % 255) - 127; i16[a3 / 2 + 6 * t + 1] = (t * 91 % 255) - 127; }
ex.quad_row(a3, aq, kc, 0, xs);
for (let i = 0; i < total; i++) u8[w + i] = (i * 73 + 11) & 255;
const res = { old: [], neu: [], stream: [] };
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
for (let round = 0; round < 9; round++) for (const which of ['old', 'neu', 'stream']) {
  ex.stream_f32(big, bigBytes / 4); // evict
  const t0 = cpu();
  for (let e = 0; e < experts; e++) {
    if (which === 'stream') ex.stream_f32(w + e * ebytes, ebytes / 4);
    else ex.stream_dq4(npan, kc, 5, which === 'neu' ? 1 : 0, which === 'neu' ? aq : a3, xs, w + e * ebytes, c);
  }
  res[which].push(cpu() - t0);
}
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
for (const [k, v] of Object.entries(res)) console.log(process.version, isa, k.padEnd(7), med(v).toFixed(2), 'ms', (total / med(v) / 1e6).toFixed(2), 'GB/s');
