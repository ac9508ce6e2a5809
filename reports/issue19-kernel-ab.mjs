// Issue 19: bare 1-row decode kernels (ukernel_lowp16, L1-resident), two builds A/B in one process,
// timed by process CPU time (robust to a shared machine). Usage: build the old commit's wasm into a
// folder, then: OLD_DIR=<folder> node reports/issue19-kernel-ab.mjs simd128|relaxed [reps] [dts: 3=s8 5=s4 6=u4 9=f4]
// (relaxed on Node 22+). Prints best-of-15 rates, and old/new time ratios.
import fs from 'node:fs';
const isa = process.argv[2] ?? 'simd128';
const kc = 256, reps = Number(process.argv[3] ?? 10000);
async function load(path) {
  const memory = new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true });
  const { instance } = await WebAssembly.instantiate(fs.readFileSync(path), { env: { memory } });
  const ex = instance.exports;
  ex.__stack_pointer.value = 65536;
  const base = (ex.__heap_base.value + 4095) & ~4095;
  const a = base, w = base + 65536, c = base + 3 * 65536, sq = c + 1024;
  const f = new Float32Array(memory.buffer);
  for (let i = 0; i < 4 * kc; i++) f[a / 4 + i] = Math.sin(i);
  const u8 = new Uint8Array(memory.buffer);
  for (let i = 0; i < 2 * 8 * kc; i++) u8[w + i] = (i * 73 + 11) & 255;
  for (let i = 0; i < 16; i++) f[sq / 4 + i] = 1 + i / 16;
  return { ex, a, w, c, sq, f };
}
const mods = { old: await load(`${process.env.OLD_DIR}/groupdnn-${isa}.wasm`), new: await load(new URL(`../wasm/build/groupdnn-${isa}.wasm`, import.meta.url)) };
const names = { 3: 's8', 4: 'u8', 5: 's4', 6: 'u4', 7: 'e4m3', 9: 'f4' };
const res = {};
for (let round = 0; round < 15; round++)
  for (const dt of (process.argv[4] ?? "3,4,5,6,9").split(",").map(Number)) for (const sc of [0, 1]) for (const which of ['old', 'new']) {
    const m = mods[which];
    const ps = dt === 5 || dt === 6 || dt === 9 ? 4 * kc : 8 * kc;
    const c0 = process.cpuUsage();
    m.ex.ukernel_lowp16(reps, kc, dt, m.a, m.w, ps, m.c, sc ? m.sq : 0);
    const cu = process.cpuUsage(c0);
    const t = (cu.user + cu.system) / 1000;
    const key = `${names[dt]}${sc ? '+s' : ''}`;
    ((res[key] ??= { old: [], new: [] })[which]).push(t);
  }
// check equal output
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
for (const [k, v] of Object.entries(res)) {
  const ratios = v.old.map((o, i) => o / v.new[i]);
  console.log(process.version, isa, k.padEnd(6), "best old", (16 * kc * reps / Math.min(...v.old) / 1e6).toFixed(2), "new", (16 * kc * reps / Math.min(...v.new) / 1e6).toFixed(2), "Gw/s; best old/new", (Math.min(...v.old) / Math.min(...v.new)).toFixed(2), "median ratio", med(ratios).toFixed(2));
}
