/**
 * reorder with a gpu engine on either side (issue 20): cpu -> gpu uploads, gpu -> gpu on the device,
 * gpu -> cpu downloads. Every pair is checked against an independent float64 rounding (values) and
 * against the cpu engine's reorder on the same bytes (bit for bit, padding included).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, GpuEngine, GpuMemory, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, reorder, setVerbose, setVerboseSink, tag,
  type DataType, type MemoryDesc,
} from '../src/index.js';
import { gpuEngine } from './gpu_helpers.js';
import { expectDnnlError } from './helpers.js';
import { mulberry32 } from './workloads.js';
import { packedWeightsDesc } from '../src/memory/packed_weights.js';
import { hostImage, valuesStep, webgpuReorder, type GpuReorderProblem } from '../src/primitives/reorder/webgpu_reorder.js';

let gpu: GpuEngine;
let cpu: Engine;
let gs: Stream;
let cs: Stream;
beforeAll(async () => {
  gpu = await gpuEngine();
  cpu = await Engine.create({ threads: 1, kernels: 'none' });
  gs = new Stream(gpu);
  cs = new Stream(cpu);
});
afterAll(() => {
  gpu?.release();
  cpu?.release();
});

/** Round half to even at `mant` fraction bits, exponents [emin, emax], overflow to infinity (IEEE). */
function roundFloat(x: number, mant: number, emin: number, emax: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  e = Math.max(e, emin);
  const ulp = 2 ** (e - mant), q = a / ulp, f = Math.floor(q);
  const r = q - f > 0.5 || (q - f === 0.5 && f % 2 === 1) ? f + 1 : f;
  const v = r * ulp;
  return Math.sign(x) * (v >= 2 ** (emax + 1) ? Infinity : v);
}

/** The value a float type stores for x (independent of src/common/data_type.ts). */
function asType(t: DataType, x: number): number {
  if (t === 'bf16') return roundFloat(x, 7, -126, 127);
  if (t === 'f16') return roundFloat(x, 10, -14, 15);
  if (t === 'f32') return Math.fround(x);
  return x;
}

/** Values of type t: for floats, random bit patterns (rounding cases, subnormals, infinities), no NaN. */
function valuesOf(t: DataType, n: number, seed: number): Float64Array {
  const rng = mulberry32(seed);
  const out = new Float64Array(n);
  const bits = new Uint32Array(1), f = new Float32Array(bits.buffer);
  const pick: Record<string, readonly number[]> = {
    s8: [-128, -7, 0, 5, 127], u8: [0, 3, 200, 255], s4: [-8, -3, 0, 1, 7], u4: [0, 2, 9, 15], s32: [-70000, -1, 0, 123456],
    f8_e4m3: [-448, -0.5, 0, 0.125, 3], f4_e2m1: [-6, -1.5, 0, 0.5, 4],
  };
  for (let i = 0; i < n; i++) {
    if (pick[t]) {
      out[i] = pick[t][Math.floor(rng() * pick[t].length)];
      continue;
    }
    const special = [Infinity, -Infinity, -0, 65520, 65519.99, 2 ** -24, 2 ** -25 * 3, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 2 ** -130];
    if (rng() < 0.3) out[i] = special[Math.floor(rng() * special.length)];
    else {
      // exponents around f16's range so every rounding regime shows up
      const e = 127 + Math.floor(rng() * 50) - 28;
      bits[0] = ((rng() < 0.5 ? 1 : 0) << 31) | (e << 23) | Math.floor(rng() * 0x800000);
      out[i] = f[0];
    }
    out[i] = asType(t, out[i]);
  }
  return out;
}

/** Physical index of every logical (row-major) element. */
function physical(md: MemoryDesc): number[] {
  const n = md.dims.reduce((a, b) => a * b, 1), nd = md.ndims;
  return Array.from({ length: n }, (_, i) => {
    let rem = i, off = 0;
    for (let d = nd - 1; d >= 0; d--) {
      off += (rem % md.dims[d]) * md.strides[d];
      rem = Math.floor(rem / md.dims[d]);
    }
    return off;
  });
}

const FILL: Record<string, number> = { s8: 3, u8: 3, s4: 3, u4: 3, s32: 3, f8_e4m3: 0.75, f4_e2m1: 0.5 };

/** The whole span: logical values in place, padding set to a sentinel the reorder must not touch. */
function spanOf(md: MemoryDesc, logical: Float64Array): Float64Array {
  const span = new Float64Array(md.spanElems).fill(FILL[md.dataType] ?? 0.75);
  physical(md).forEach((p, i) => (span[p] = logical[i]));
  return span;
}

const cpuBytes = (m: Memory): Uint8Array => Uint8Array.from(m.bytes(0));
const same = (a: ArrayLike<number>, b: ArrayLike<number>): boolean => a.length === b.length && Array.from(a).every((x, i) => Object.is(x, b[i]));

/** Logical values of a gpu / cpu memory. */
async function logicalOf(m: Memory | GpuMemory): Promise<number[]> {
  const span = await m.read();
  return physical(m.desc).map((p) => span[p]);
}

/**
 * Runs src -> dst on the three paths and checks each against the float64 rounding and the cpu reorder's
 * bytes; returns the cpu reorder's dst bytes.
 */
async function checkAllPaths(srcMd: MemoryDesc, dstMd: MemoryDesc, seed: number): Promise<void> {
  const n = srcMd.nelems;
  const vals = valuesOf(srcMd.dataType, n, seed);
  const expected = Array.from(vals, (v) => asType(dstMd.dataType, v));
  // the cpu engine's reorder: the bytes every path must reproduce
  const cSrc = Memory.create(srcMd, cpu).write(spanOf(srcMd, vals));
  const cDst = Memory.create(dstMd, cpu).write(spanOf(dstMd, new Float64Array(n)));
  const dstInit = cpuBytes(cDst);
  new reorder.Primitive(new reorder.PrimitiveDesc(cpu, srcMd, dstMd)).execute(cs, { [ARG.FROM]: cSrc, [ARG.TO]: cDst });
  await cs.wait();
  const want = cpuBytes(cDst);
  expect(same(await logicalOf(cDst), expected)).toBe(true);

  const gSrc = Memory.create(srcMd, gpu).write(spanOf(srcMd, vals));
  for (const path of ['upload', 'device'] as const) {
    const gDst = Memory.create(dstMd, gpu).write(spanOf(dstMd, new Float64Array(n)));
    const pd = path === 'upload' ? new reorder.PrimitiveDesc(cpu, srcMd, gpu, dstMd) : new reorder.PrimitiveDesc(gpu, srcMd, dstMd);
    expect(pd.implInfo).toMatch(new RegExp(`^webgpu:${path}:`));
    new reorder.Primitive(pd).execute(gs, { [ARG.FROM]: path === 'upload' ? cSrc : gSrc, [ARG.TO]: gDst });
    await gs.wait();
    const got = await gDst.readBytes(0);
    expect({ path, bytes: Array.from(got.subarray(0, want.length)) }).toEqual({ path, bytes: Array.from(want) });
    expect(same(await logicalOf(gDst), expected)).toBe(true);
    gDst.free();
  }
  // download: into a cpu memory whose padding holds the sentinel
  const dDst = Memory.create(dstMd, cpu);
  dDst.bytes(0).set(dstInit);
  const pd = new reorder.PrimitiveDesc(gpu, srcMd, cpu, dstMd);
  const wholeBytes = !['s4', 'u4', 'f4_e2m1'].includes(srcMd.dataType) || n % 2 === 0;
  expect(pd.implInfo).toBe(srcMd.dataType === dstMd.dataType && srcMd.equals(dstMd) && srcMd.spanElems === n && wholeBytes && srcMd.getSize(0) % 4 === 0 ? 'webgpu:download:copy' : 'webgpu:download:host-convert');
  new reorder.Primitive(pd).execute(gs, { [ARG.FROM]: gSrc, [ARG.TO]: dDst });
  await gs.wait();
  expect(Array.from(cpuBytes(dDst))).toEqual(Array.from(want));
  [cSrc, cDst, gSrc, dDst].forEach((m) => m.free());
}

const FLOATS = ['f32', 'bf16', 'f16'] as const;
const FLOAT_PAIRS = FLOATS.flatMap((a) => FLOATS.map((b) => [a, b] as const));

describe('gpu reorder: plain layouts', () => {
  it.each(FLOAT_PAIRS)('%s -> %s, abc -> acb (odd sizes)', async (a, b) => {
    await checkAllPaths(memory.desc([3, 5, 7], a, tag.abc), memory.desc([3, 5, 7], b, tag.acb), 1);
  });

  it.each(FLOAT_PAIRS)('%s -> %s, ba -> ab', async (a, b) => {
    await checkAllPaths(memory.desc([9, 5], a, tag.ba), memory.desc([9, 5], b, tag.ab), 2);
  });

  it.each(FLOAT_PAIRS)('%s -> %s, same dense layout', async (a, b) => {
    await checkAllPaths(memory.desc([4, 6], a, tag.ab), memory.desc([4, 6], b, tag.ab), 3);
  });

  it.each(['s8', 'u8', 's4', 'u4', 's32', 'f8_e4m3', 'f4_e2m1'] as const)('%s codes copied as stored: abc -> acb, padded strides, odd sizes', async (t) => {
    await checkAllPaths(memory.desc([3, 5, 7], t, tag.abc), memory.desc([3, 5, 7], t, tag.acb), 4);
    // padded on both sides: src rows of 8, dst N outermost with gaps
    await checkAllPaths(memory.desc([3, 5, 7], t, [40, 8, 1]), memory.desc([3, 5, 7], t, [1, 32, 4]), 5);
    await checkAllPaths(memory.desc([3, 5, 7], t, tag.abc), memory.desc([3, 5, 7], t, tag.abc), 6);
  });

  it('f32 -> bf16 with padded strides on both sides (padding untouched)', async () => {
    await checkAllPaths(memory.desc([3, 5, 7], dt.f32, [40, 8, 1]), memory.desc([3, 5, 7], dt.bf16, [1, 32, 4]), 7);
    await checkAllPaths(memory.desc([3, 5, 7], dt.f16, [1, 32, 4]), memory.desc([3, 5, 7], dt.f32, [40, 8, 1]), 8);
  });

  it('dims of extent 1 and a 1D tensor', async () => {
    await checkAllPaths(memory.desc([1, 9, 1], dt.f32, tag.acb), memory.desc([1, 9, 1], dt.f16, tag.abc), 9);
    await checkAllPaths(memory.desc([1], dt.bf16, tag.a), memory.desc([1], dt.f32, tag.a), 10);
    await checkAllPaths(memory.desc([13], dt.u4, tag.a), memory.desc([13], dt.u4, [2]), 11);
  });

  it('a tensor larger than one workgroup row of words (several workgroups)', async () => {
    await checkAllPaths(memory.desc([2, 40, 33], dt.f32, tag.abc), memory.desc([2, 40, 33], dt.bf16, tag.acb), 12);
  });

  it('empty tensors: nothing moves, nothing fails', async () => {
    for (const dims of [[0, 4], [3, 0, 2]]) {
      const t = dims.length === 2 ? tag.ab : tag.abc, u = dims.length === 2 ? tag.ba : tag.acb;
      const s = memory.desc(dims, dt.f32, t), d = memory.desc(dims, dt.f16, u);
      const g = Memory.create(s, gpu), h = Memory.create(d, gpu), c = Memory.create(s, cpu), e = Memory.create(d, cpu);
      for (const [pd, from, to] of [
        [new reorder.PrimitiveDesc(cpu, s, gpu, d), c, h], [new reorder.PrimitiveDesc(gpu, s, d), g, h], [new reorder.PrimitiveDesc(gpu, s, cpu, d), g, e],
      ] as const) {
        new reorder.Primitive(pd).execute(gs, { [ARG.FROM]: from, [ARG.TO]: to });
        await gs.wait();
      }
      expect(await h.read()).toHaveLength(0);
      [g, h, c, e].forEach((m) => m.free());
    }
  });
});

describe('gpu reorder: tensors larger than one storage binding', () => {
  /** The real engine, claiming a 64-byte binding limit (the path choice reads only caps). */
  const small = (): GpuEngine => new Proxy(gpu, { get: (t, k) => (k === 'caps' ? { ...t.caps, maxStorageBufferBindingSize: 64 } : Reflect.get(t, k)) as unknown });
  const problem = (src: MemoryDesc, dst: MemoryDesc, path: GpuReorderProblem['path']): GpuReorderProblem => ({ src, dst, path, gpu: small(), cpu: path === 'device' ? undefined : cpu });

  it('an upload into a dense dst converts on the host, bit-identical to the cpu reorder', async () => {
    for (const [srcMd, dstMd] of [
      [memory.desc([3, 5, 7], dt.f32, tag.acb), memory.desc([3, 5, 7], dt.bf16, tag.abc)],
      [memory.desc([4, 6], dt.f16, tag.ab), memory.desc([4, 6], dt.f32, tag.ba)],
      [memory.desc([12, 14], dt.s4, tag.ab), memory.desc([12, 14], dt.s4, tag.ba)],
    ] as const) {
      const p = problem(srcMd, dstMd, 'upload');
      expect(valuesStep(p)).toBe('host');
      expect(webgpuReorder.reject(p)).toBeUndefined();
      expect(webgpuReorder.describe(p)).toBe('webgpu:upload:host-convert');
      const vals = valuesOf(srcMd.dataType, srcMd.nelems, 15);
      const c = Memory.create(srcMd, cpu).write(spanOf(srcMd, vals));
      const want = Memory.create(dstMd, cpu);
      new reorder.Primitive(new reorder.PrimitiveDesc(cpu, srcMd, dstMd)).execute(cs, { [ARG.FROM]: c, [ARG.TO]: want });
      await cs.wait();
      expect(Array.from(hostImage(srcMd, c, dstMd).subarray(0, dstMd.getSize(0)))).toEqual(Array.from(cpuBytes(want)));
      const g = Memory.create(dstMd, gpu);
      gs.enqueue(webgpuReorder.task(p, c, g));
      await gs.wait();
      expect(Array.from((await g.readBytes(0)).subarray(0, dstMd.getSize(0)))).toEqual(Array.from(cpuBytes(want)));
      [c, want, g].forEach((m) => m.free());
    }
  });

  it('a padded dst, or a conversion on the device, is unimplemented; identical dense layouts copy bytes', () => {
    const big = memory.desc([4, 6], dt.f32, tag.ab);
    for (const p of [problem(big, memory.desc([4, 6], dt.f32, [8, 1]), 'upload'), problem(big, memory.desc([4, 6], dt.bf16, tag.ab), 'device')]) {
      expect(valuesStep(p)).toBe('kernel');
      expect(webgpuReorder.reject(p)).toMatch(/^src has 96 bytes, more than one storage binding \(64\): a layout change or conversion of a tensor that large on the device \(or into a padded dst\) is not implemented on the gpu engine yet/);
    }
    expect(valuesStep(problem(big, big, 'device'))).toBe('bytes');
    expect(webgpuReorder.reject(problem(big, big, 'device'))).toBeUndefined();
    expect(valuesStep(problem(big, memory.desc([4, 6], dt.bf16, tag.ba), 'download'))).toBe('host');
  });
});

describe('gpu reorder: grouped memory (values + offsets)', () => {
  const sizes = [4, 0, 5, 1];
  const G = sizes.length, rows = 12, K = 6;
  const srcMd = memory.desc.grouped([rows, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([rows, K], dt.bf16, G, [RUNTIME_DIM_VAL, K]);
  const offs = offsets.fromSizes(sizes);

  it('upload, device and download carry the offsets and convert the values', async () => {
    const vals = valuesOf('f32', rows * K, 13);
    const want = Array.from(vals, (v) => asType('bf16', v));
    const c = Memory.create(srcMd, cpu);
    c.write(vals);
    c.offsets.set(offs);
    const up = Memory.create(dstMd, gpu);
    new reorder.Primitive(new reorder.PrimitiveDesc(cpu, srcMd, gpu, dstMd)).execute(gs, { [ARG.FROM]: c, [ARG.TO]: up });
    const dev = Memory.create(srcMd, gpu);
    new reorder.Primitive(new reorder.PrimitiveDesc(gpu, dstMd, srcMd)).execute(gs, { [ARG.FROM]: up, [ARG.TO]: dev });
    const down = Memory.create(dstMd, cpu);
    new reorder.Primitive(new reorder.PrimitiveDesc(gpu, srcMd, cpu, dstMd)).execute(gs, { [ARG.FROM]: dev, [ARG.TO]: down });
    await gs.wait();
    expect(Array.from(await up.readOffsets())).toEqual(Array.from(offs));
    expect(Array.from(await dev.readOffsets())).toEqual(Array.from(offs));
    expect(Array.from(down.offsets)).toEqual(Array.from(offs));
    expect(same(Array.from(await up.read()), want)).toBe(true);
    expect(same(Array.from(await dev.read()), want)).toBe(true); // bf16 -> f32 is exact
    expect(same(Array.from(down.read()), want)).toBe(true);
    [c, up, dev, down].forEach((m) => m.free());
  });

  it('offsets written on the device by earlier work reach the dst without a host read', async () => {
    const a = Memory.create(srcMd, gpu), b = Memory.create(srcMd, gpu), d = Memory.create(dstMd, gpu);
    a.write(new Float64Array(rows * K).fill(1)).writeOffsets(offs);
    new reorder.Primitive(new reorder.PrimitiveDesc(gpu, srcMd, srcMd)).execute(gs, { [ARG.FROM]: a, [ARG.TO]: b });
    new reorder.Primitive(new reorder.PrimitiveDesc(gpu, srcMd, dstMd)).execute(gs, { [ARG.FROM]: b, [ARG.TO]: d });
    await gs.wait();
    expect(Array.from(await d.readOffsets())).toEqual(Array.from(offs));
    [a, b, d].forEach((m) => m.free());
  });

  it('a dst sharing the src offsets buffer keeps it (no self-copy)', async () => {
    const a = Memory.create(srcMd, gpu).writeOffsets(offs);
    a.write(valuesOf('f32', rows * K, 14));
    const d = Memory.create(dstMd, gpu, [undefined, a.handles[1]]);
    new reorder.Primitive(new reorder.PrimitiveDesc(gpu, srcMd, dstMd)).execute(gs, { [ARG.FROM]: a, [ARG.TO]: d });
    await gs.wait();
    expect(Array.from(await d.readOffsets())).toEqual(Array.from(offs));
    [a, d].forEach((m) => m.free());
  });
});

describe('gpu reorder: host f32 weights into a gpu matmul pd\'s tag.any weights', () => {
  it.each([['f32', tag.acb], ['f16', tag.abc], ['bf16', tag.acb]] as const)('%s weights from host f32 %s', async (wdt, userTag) => {
    const sizes = [3, 0, 6], G = 3, K = 20, N = 13, M = 9;
    const srcMd = memory.desc.grouped([M, K], wdt, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([M, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const pd = new matmul.PrimitiveDesc(gpu, srcMd, memory.desc([G, K, N], wdt, tag.any), dstMd);
    const weiMd = pd.queryMd('weights')!;
    const userMd = memory.desc([G, K, N], dt.f32, userTag);
    const rng = mulberry32(21);
    const w = Float64Array.from({ length: G * K * N }, () => Math.floor(rng() * 5) - 2);
    const x = Float64Array.from({ length: M * K }, () => Math.floor(rng() * 5) - 2);
    const user = Memory.create(userMd, cpu).write(spanOf(userMd, w));
    const wei = Memory.create(weiMd, gpu);
    const rpd = new reorder.PrimitiveDesc(cpu, userMd, gpu, weiMd);
    new reorder.Primitive(rpd).execute(gs, { [ARG.FROM]: user, [ARG.TO]: wei });
    const src = Memory.create(srcMd, gpu).write(x).writeOffsets(offsets.fromSizes(sizes));
    const dst = Memory.create(dstMd, gpu, [undefined, src.handles[1]]);
    new matmul.Primitive(pd).execute(gs, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await gs.wait();
    const y = await dst.read();
    let row = 0;
    for (let g = 0; g < G; g++) {
      for (let r = 0; r < sizes[g]; r++, row++) {
        for (let n = 0; n < N; n++) {
          let s = 0;
          for (let k = 0; k < K; k++) s += x[row * K + k] * w[(g * K + k) * N + n];
          expect(y[row * N + n]).toBe(s);
        }
      }
    }
    [user, wei, src, dst].forEach((m) => m.free());
  });
});

describe('gpu reorder: bad arguments', () => {
  const f32 = memory.desc([4, 6], dt.f32, tag.ab);

  it('the cpu engine\'s rules and messages', () => {
    expectDnnlError(() => new reorder.PrimitiveDesc(gpu, f32, memory.desc([6, 4], dt.f32, tag.ab)), 'invalid_arguments', 'reorder: src dims [4,6] must equal dst dims [6,4]');
    expectDnnlError(() => new reorder.PrimitiveDesc(cpu, memory.desc([4, 6], dt.s8, tag.ab), gpu, f32), 'unimplemented', 'reorder: s8 -> f32 is not supported (same type, or between f32, bf16, f16)');
    expectDnnlError(() => new reorder.PrimitiveDesc(gpu, f32, cpu, memory.desc([4, 6], dt.s4, tag.ab)), 'unimplemented', 'reorder: f32 -> s4 is not supported');
    expectDnnlError(() => new reorder.PrimitiveDesc(gpu, f32, memory.desc([4, 6], dt.f32, tag.any)), 'invalid_arguments', 'reorder: dst must be plain or packed, got any');
    expectDnnlError(() => new reorder.PrimitiveDesc(gpu, f32, undefined as never), 'invalid_arguments', 'reorder: dst must be a memory descriptor');
  });

  it('packed (cpu) weights layouts are unimplemented on the gpu engine, naming the layout', () => {
    const packed = packedWeightsDesc([2, 16, 8]); // what a cpu matmul pd answers for tag.any weights
    expect(packed.format).toBe('packed');
    const e = expectDnnlError(() => new reorder.PrimitiveDesc(cpu, memory.desc([2, 16, 8], dt.f32, tag.abc), gpu, packed), 'unimplemented', `packed layout ${packed.packed!.name} is not implemented on the gpu engine`);
    expect(e.message).toContain('query the gpu pd\'s weights');
  });

  it('grouped memory: both sides grouped, one partition', () => {
    const g = memory.desc.grouped([8, 4], dt.f32, 2, [RUNTIME_DIM_VAL, 4]);
    expectDnnlError(() => new reorder.PrimitiveDesc(gpu, g, memory.desc([8, 4], dt.f32, tag.ab)), 'invalid_arguments', 'reorder: grouped memory reorders into grouped memory only');
    expectDnnlError(() => new reorder.PrimitiveDesc(gpu, g, memory.desc.grouped([8, 4], dt.f32, 3, [RUNTIME_DIM_VAL, 4])), 'invalid_arguments', 'reorder: src and dst must share one grouped partition');
    // the cpu engine alone keeps its rule
    expectDnnlError(() => new reorder.PrimitiveDesc(cpu, g, g), 'invalid_arguments', 'reorder: src must be a plain descriptor, got grouped');
  });

  it('execute: memories of the right engines, a stream of the gpu engine, no quant args', async () => {
    const pd = new reorder.PrimitiveDesc(cpu, f32, gpu, f32);
    const prim = new reorder.Primitive(pd);
    const c = Memory.create(f32, cpu), g = Memory.create(f32, gpu), g2 = Memory.create(f32, gpu);
    expectDnnlError(() => prim.execute(cs, { [ARG.FROM]: c, [ARG.TO]: g }), 'invalid_arguments', 'reorder.execute: a reorder with a gpu engine runs on a stream of that gpu engine');
    expectDnnlError(() => prim.execute(gs, { [ARG.FROM]: g2, [ARG.TO]: g }), 'invalid_arguments', 'reorder.execute: ARG.FROM belongs to another engine');
    expectDnnlError(() => prim.execute(gs, { [ARG.FROM]: c }), 'invalid_arguments', 'reorder.execute: missing argument ARG.TO');
    expectDnnlError(() => prim.execute(gs, { [ARG.FROM]: c, [ARG.TO]: g, [ARG.ATTR_SCALES | ARG.WEIGHTS]: g2 }), 'invalid_arguments', 'stores no weights scales or zero points');
    const other = Memory.create(memory.desc([4, 6], dt.f32, tag.ba), gpu);
    expectDnnlError(() => prim.execute(gs, { [ARG.FROM]: c, [ARG.TO]: other }), 'invalid_arguments', 'reorder.execute: ARG.TO descriptor');
    expectDnnlError(() => new reorder.Primitive(new reorder.PrimitiveDesc(gpu, f32, f32)).execute(gs, { [ARG.FROM]: g, [ARG.TO]: g }), 'invalid_arguments', 'ARG.FROM and ARG.TO must be different buffers');
    await gs.wait();
    [c, g, g2, other].forEach((m) => m.free());
  });

  it('verbose: creation and execution lines name the webgpu impl (a download\'s once it completes)', async () => {
    const lines: string[] = [];
    const prev = setVerboseSink((l) => lines.push(l));
    setVerbose(1);
    try {
      const g = Memory.create(f32, gpu).write(new Float64Array(24).fill(1));
      const c = Memory.create(memory.desc([4, 6], dt.bf16, tag.ba), cpu);
      new reorder.Primitive(new reorder.PrimitiveDesc(gpu, f32, cpu, c.desc)).execute(gs, { [ARG.FROM]: g, [ARG.TO]: c });
      await gs.wait();
      expect(lines.filter((l) => l.includes(',reorder,webgpu:download:host-convert,')).map((l) => l.split(',')[2])).toEqual(['create:cache_miss', 'exec']);
      [g, c].forEach((m) => m.free());
    } finally {
      setVerbose(0);
      setVerboseSink(prev);
    }
  });

  it('a download completes at the gpu stream\'s wait()', async () => {
    const g = Memory.create(f32, gpu).write(new Float64Array(24).fill(2.5));
    const c = Memory.create(f32, cpu).write(new Float64Array(24));
    new reorder.Primitive(new reorder.PrimitiveDesc(gpu, f32, cpu, f32)).execute(gs, { [ARG.FROM]: g, [ARG.TO]: c });
    expect(gs.busy).toBe(true);
    await gs.wait();
    expect(Array.from(c.read())).toEqual(new Array(24).fill(2.5));
    [g, c].forEach((m) => m.free());
  });
});

/** Every path of a reorder from raw src bytes into a dst holding `init`: the dst bytes after it (cpu first, then upload, device, download). */
async function bytesThroughAllPaths(srcMd: MemoryDesc, dstMd: MemoryDesc, src: Uint8Array, init: Uint8Array): Promise<{ path: string; bytes: number[] }[]> {
  const out: { path: string; bytes: number[] }[] = [];
  const cSrc = Memory.create(srcMd, cpu), cDst = Memory.create(dstMd, cpu);
  cSrc.bytes(0).set(src);
  cDst.bytes(0).set(init);
  new reorder.Primitive(new reorder.PrimitiveDesc(cpu, srcMd, dstMd)).execute(cs, { [ARG.FROM]: cSrc, [ARG.TO]: cDst });
  await cs.wait();
  out.push({ path: 'cpu', bytes: Array.from(cDst.bytes(0)) });
  const gSrc = Memory.create(srcMd, gpu).writeBytes(src);
  for (const path of ['upload', 'device', 'download'] as const) {
    const gDst = Memory.create(dstMd, gpu).writeBytes(init), hDst = Memory.create(dstMd, cpu);
    hDst.bytes(0).set(init);
    const pd = path === 'upload' ? new reorder.PrimitiveDesc(cpu, srcMd, gpu, dstMd) : path === 'device' ? new reorder.PrimitiveDesc(gpu, srcMd, dstMd) : new reorder.PrimitiveDesc(gpu, srcMd, cpu, dstMd);
    expect(pd.implInfo).toMatch(new RegExp(`^webgpu:${path}:`));
    new reorder.Primitive(pd).execute(gs, { [ARG.FROM]: path === 'upload' ? cSrc : gSrc, [ARG.TO]: path === 'download' ? hDst : gDst });
    await gs.wait();
    out.push({ path, bytes: Array.from(path === 'download' ? hDst.bytes(0) : await gDst.readBytes(0)) });
    [gDst, hDst].forEach((m) => m.free());
  }
  [cSrc, cDst, gSrc].forEach((m) => m.free());
  return out;
}

describe('gpu reorder: bits the conversion keeps', () => {
  it('f32 NaNs (signaling ones too) move as their bits; bf16 -> f32 is the 16-bit shift on both engines', async () => {
    // a layout change (the plain kernel, the cpu's element loop) and a same-layout copy
    const f32Nans = Uint32Array.of(0x7f800001, 0xff900000, 0x3f800000, 0x7fc00001);
    for (const dstTag of [tag.ba, tag.ab]) {
      const got = await bytesThroughAllPaths(memory.desc([2, 2], dt.f32, tag.ab), memory.desc([2, 2], dt.f32, dstTag), new Uint8Array(f32Nans.buffer), new Uint8Array(16));
      const want = Array.from(new Uint8Array((dstTag === tag.ab ? f32Nans : Uint32Array.of(f32Nans[0], f32Nans[2], f32Nans[1], f32Nans[3])).buffer));
      for (const g of got) expect(g).toEqual({ path: g.path, bytes: want });
    }
    const bf16Nans = Uint16Array.of(0x7f81, 0xffa0, 0x3f80, 0x7fc1);
    const got = await bytesThroughAllPaths(memory.desc([4], dt.bf16, tag.a), memory.desc([4], dt.f32, tag.a), new Uint8Array(bf16Nans.buffer), new Uint8Array(16));
    const want = Array.from(new Uint8Array(Uint32Array.from(bf16Nans, (b) => b << 16).buffer));
    for (const g of got) expect(g).toEqual({ path: g.path, bytes: want });
  });

  it('an odd count of 4-bit codes in one dense layout: the dst keeps its padding nibble', async () => {
    for (const t of [dt.s4, dt.u4, dt.f4_e2m1]) {
      const md = memory.desc([3, 5], t, tag.ab); // 15 nibbles in 8 bytes: the high nibble of byte 7 is padding
      const got = await bytesThroughAllPaths(md, md, new Uint8Array(8).fill(0x77), new Uint8Array(8));
      for (const g of got) expect(g).toEqual({ path: g.path, bytes: [0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x07] });
    }
  });
});
