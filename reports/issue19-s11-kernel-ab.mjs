// Issue 19 (session 11): A/B of the 1-row decode kernels between two (or more) builds of the wasm module, every build
// in one process, samples interleaved, process CPU time. The builds: wasm/build/groupdnn-<isa>.wasm of each tree (e.g.
// `git archive <commit> | tar -x -C /tmp/base && (cd /tmp/base && bash wasm/build.sh)` for the former one).
// Usage: node reports/issue19-s11-kernel-ab.mjs l1|stream|dq4 A.wasm B.wasm [...]
//   l1:     f32_gemm_1x16r8 / r4 (ukernel_relaxed16) on L1-resident operands, 1 x 16 x 256, s8 / s4 / u4; best G weights/s
//   stream: the relaxed kernels over 24 experts x 176 panels x 2048 k of s4 (env DT=s8: s8) codes from memory (evicted by a
//           256 MB pass before each sample), and a plain read of the same bytes (stream_f32); median ms
//   dq4:    s16_dq_1x16w4 (stream_dq4) over the same s4 panels from memory, and the plain read; median ms
// Prints each build's figure and its median per-round ratio to the first build (> 1: faster), and whether the builds'
// results are bitwise equal.
import fs from 'node:fs';
const [mode, ...files] = process.argv.slice(2);
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const med = (v) => { const x = [...v].sort((p, q) => p - q); return x[x.length >> 1]; };
const name = (f) => f.split('/').slice(-4).join('/');
const ratio = (a, b) => med(a.map((p, j) => p / b[j])).toFixed(2);
// A build in a memory of its own (the modules' data segments sit at the same addresses), its stack set, and the
// first page-aligned byte past its heap base.
async function instantiate(f) {
  const memory = new WebAssembly.Memory({ initial: 512, maximum: 65536, shared: true });
  const { instance } = await WebAssembly.instantiate(fs.readFileSync(f), { env: { memory } });
  const ex = instance.exports;
  ex.__stack_pointer.value = 65536;
  return { ex, memory, base: (ex.__heap_base.value + 4095) & ~4095 };
}

if (mode === 'l1') {
  const kc = 256, reps = Number(process.env.REPS ?? 2000);
  const mods = [];
  for (const f of files) {
    const { ex, memory, base } = await instantiate(f);
    const m = { ex, a: base, w: base + 65536, c: base + 3 * 65536, xd: base + 4 * 65536, f: new Float32Array(memory.buffer) };
    const u8 = new Uint8Array(memory.buffer);
    for (let i = 0; i < 4 * kc; i++) m.f[m.a / 4 + i] = Math.sin(i);
    for (let i = 0; i < 2 * 8 * kc; i++) u8[m.w + i] = (i * 73 + 11) & 255;
    mods.push(m);
  }
  const names = { 3: 's8', 5: 's4', 6: 'u4' }, res = {}, bits = {};
  for (let round = 0; round < 15; round++) for (const dt of [3, 5, 6]) for (const [i, m] of mods.entries()) {
    const ps = dt >= 5 ? 4 * kc : 8 * kc;
    const t0 = cpu();
    m.ex.ukernel_relaxed16(reps, kc, dt, m.a, m.w, ps, m.c, 0, m.xd);
    ((res[names[dt]] ??= mods.map(() => []))[i]).push(cpu() - t0);
    if (round === 0) {
      m.ex.ukernel_relaxed16(1, kc, dt, m.a, m.w, ps, m.c, 0, m.xd);
      (bits[names[dt]] ??= []).push(Array.from(m.f.slice(m.c / 4, m.c / 4 + 16)).join());
    }
  }
  for (const [k, v] of Object.entries(res))
    console.log(process.version, 'l1', k, v.map((t, i) => `${name(files[i])} ${(16 * kc * reps / Math.min(...t) / 1e6).toFixed(2)} G weights/s${i ? ` (x${ratio(v[0], t)})` : ''}`).join('  '),
      'same bits:', bits[k].every((b) => b === bits[k][0]));
} else {
  const s8 = mode === 'stream' && process.env.DT === 's8';
  const kc = 2048, npan = 176, experts = 24, bpk = s8 ? 8 : 4;
  const ebytes = npan * bpk * kc, total = ebytes * experts;
  const bigBytes = 256 << 20; // the eviction pass
  const mods = [];
  for (const f of files) {
    const { ex, memory, base } = await instantiate(f);
    const m = { ex, memory, xd: base, a3: base, aq: base + 65536, c: base + 2 * 65536, w: base + 4 * 65536 };
    m.xs = m.aq + 16384;
    m.big = m.w + total + 4096;
    memory.grow(Math.ceil((m.big + bigBytes - memory.buffer.byteLength) / 65536) + 1);
    const f32 = new Float32Array(memory.buffer), i16 = new Int16Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
    if (mode === 'dq4') {
      for (let t = 0; t < kc / 2; t++) { i16[m.a3 / 2 + 6 * t] = (t * 37 % 255) - 127; i16[m.a3 / 2 + 6 * t + 1] = (t * 91 % 255) - 127; }
      ex.quad_row(m.a3, m.aq, kc, 0, m.xs);
    } else for (let i = 0; i < 2 * kc; i++) f32[m.xd / 4 + i] = Math.sin(i);
    for (let i = 0; i < total; i++) u8[m.w + i] = (i * 73 + 11) & 255;
    mods.push(m);
  }
  const evict = (m) => m.ex.stream_f32(m.big, bigBytes / 4);
  const run = (m, e) => mode === 'dq4' ? m.ex.stream_dq4(npan, kc, 5, 1, m.aq, m.xs, m.w + e * ebytes, m.c)
    : m.ex.stream_relaxed16(npan, kc, s8 ? 3 : 5, m.xd, m.xs, m.w + e * ebytes, m.c);
  const res = mods.map(() => []), st = [], outs = [];
  for (let round = 0; round < 11; round++) {
    for (const [i, m] of mods.entries()) {
      evict(m);
      const t0 = cpu();
      for (let e = 0; e < experts; e++) run(m, e);
      res[i].push(cpu() - t0);
      if (round === 0) outs.push(Array.from(new Uint32Array(m.memory.buffer, m.c, npan * 8)).join());
    }
    const m0 = mods[0];
    evict(m0);
    const t0 = cpu();
    for (let e = 0; e < experts; e++) m0.ex.stream_f32(m0.w + e * ebytes, ebytes / 4);
    st.push(cpu() - t0);
  }
  console.log(process.version, mode, s8 ? 's8' : 's4', `${(total / 1e6).toFixed(1)} MB, read ${med(st).toFixed(2)} ms;`,
    res.map((v, i) => `${name(files[i])} ${med(v).toFixed(2)} ms (${ratio(v, st)}x the read${i ? `, x${ratio(res[0], v)}` : ''})`).join('  '),
    'same bits:', outs.every((o) => o === outs[0]));
}
