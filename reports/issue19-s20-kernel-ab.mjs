// Issue 19 (session 20): A/B of the strict (exact) 1-row decode kernels f32_gemm_1x16w8 / w4 (ukernel_lowp16) between
// builds of the wasm module, every build in one process, samples interleaved, process CPU time.
// Usage: node reports/issue19-s20-kernel-ab.mjs l1|stream A.wasm B.wasm [...]
//   l1:     1 x 16 x 256 on L1-resident operands, s8 / u8 / s4 / u4 / f4 (env TYPES); best G weights/s
//   stream: 24 experts x 176 panel pairs x 2048 k of codes from memory, as the decode workload walks them (two
//           panels per call, env CALLK k per call, default 256); median ms, and a plain read of the same bytes
//           (stream_f32); env DT=s4 (default) / u4 / s8 / f4
// Prints each build's figure, its median per-round ratio to the first build (> 1: faster), and whether the
// builds' results are bitwise equal.
import fs from 'node:fs';
const [mode, ...files] = process.argv.slice(2);
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
const name = (f) => f.split('/').slice(-3).join('/');
const DT = { s8: 3, u8: 4, s4: 5, u4: 6, f4: 9 };
// Each build gets a shared memory of its own (their data segments sit at the same addresses); returns its exports,
// memory and first free page-aligned byte.
async function instantiate(f) {
  const env = { memory: new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true }) };
  const ex = (await WebAssembly.instantiate(fs.readFileSync(f), { env })).instance.exports;
  ex.__stack_pointer.value = 65536;
  return { ex, memory: env.memory, base: (ex.__heap_base.value + 4095) & ~4095 };
}
const types = (process.env.TYPES ?? 's8,u8,s4,u4,f4').split(',');
if (mode === 'l1') {
  const kc = 256, reps = Number(process.env.REPS ?? 2000);
  const mods = [];
  for (const f of files) {
    const { ex, memory, base } = await instantiate(f);
    const m = { ex, a: base, w: base + 65536, c: base + 3 * 65536, f: new Float32Array(memory.buffer) };
    const u8 = new Uint8Array(memory.buffer);
    for (let i = 0; i < 4 * kc; i++) m.f[m.a / 4 + i] = Math.sin(i);
    for (let i = 0; i < 2 * 8 * kc; i++) u8[m.w + i] = (i * 73 + 11) & 255;
    mods.push(m);
  }
  const res = {}, bits = {};
  for (let round = 0; round < 15; round++) for (const t of types) for (const [i, m] of mods.entries()) {
    const dt = DT[t], ps = t === 's8' ? 8 * kc : 4 * kc;
    const t0 = cpu();
    m.ex.ukernel_lowp16(reps, kc, dt, m.a, m.w, ps, m.c, 0);
    const ms = cpu() - t0;
    ((res[t] ??= {})[i] ??= []).push(16 * kc * reps / ms / 1e6);
    (bits[t] ??= {})[i] = Array.from(m.f.subarray(m.c / 4, m.c / 4 + 16));
  }
  for (const t of types) {
    const base = res[t][0];
    const line = mods.map((_, i) => `${name(files[i])} ${Math.max(...res[t][i]).toFixed(2)} G weights/s${i ? ` (x${med(res[t][i].map((v, j) => v / base[j])).toFixed(2)})` : ''}`);
    const same = mods.every((_, i) => bits[t][i].every((v, j) => Object.is(v, bits[t][0][j])));
    console.log(`${process.version} l1 ${t} ${line.join('  ')} same bits: ${same}`);
  }
} else if (mode === 'stream') {
  const K = 2048, P = 176, E = 24, t = process.env.DT ?? 's4', dt = DT[t];
  const pbytes = t === 's8' ? 8 * K : 4 * K, bytes = E * P * pbytes;
  const mods = [];
  for (const f of files) {
    const { ex, memory, base } = await instantiate(f);
    memory.grow(Math.ceil((bytes + 2 * 268435456) / 65536) + 8);
    const a = base, c = base + 65536, w = base + 4 * 65536, evict = w + bytes + 4096;
    const fl = new Float32Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
    for (let i = 0; i < 4 * K; i++) fl[a / 4 + i] = Math.sin(i);
    for (let i = 0; i < bytes; i++) u8[w + i] = (i * 73 + 11) & 255;
    mods.push({ ex, a, c, w, evict, fl });
  }
  const callK = Number(process.env.CALLK ?? 256); // k per kernel call (the driver's piece)
  const run = (m) => {
    for (let e = 0; e < E; e++) for (let p = 0; p < P; p += 2) {
      const w0 = m.w + (e * P + p) * pbytes;
      for (let k = 0; k < K; k += callK) {
        const a = m.a + 16 * k, c = m.c + 4 * 16 * p;
        m.ex.ukernel_lowp16(1, callK, dt, a, t === 's8' ? w0 + 8 * k : w0 + 4 * k, pbytes, c, 0);
      }
    }
  };
  const res = mods.map(() => []), rd = [];
  for (let round = 0; round < 9; round++) for (const [i, m] of mods.entries()) {
    m.ex.stream_f32(m.evict, 268435456 / 4);
    let t0 = cpu(); run(m); res[i].push(cpu() - t0);
    if (i === 0) { m.ex.stream_f32(m.evict, 268435456 / 4); t0 = cpu(); m.ex.stream_f32(m.w, bytes / 4); rd.push(cpu() - t0); }
  }
  const same = mods.every((m) => m.fl.subarray(m.c / 4, m.c / 4 + 16 * P).every((v, j) => Object.is(v, mods[0].fl[mods[0].c / 4 + j])));
  console.log(`${process.version} stream ${t} ${(bytes / 1e6).toFixed(1)} MB, read ${med(rd).toFixed(2)} ms; ` +
    mods.map((_, i) => `${name(files[i])} ${med(res[i]).toFixed(2)} ms (${(med(res[i]) / med(rd)).toFixed(2)}x the read${i ? `, x${med(res[i].map((v, j) => res[0][j] / v)).toFixed(2)}` : ''})`).join('  ') + ` same bits: ${same}`);
}
