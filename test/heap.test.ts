import { describe, expect, it } from 'vitest';
import { Engine, Memory, dt, memory, tag, type EngineOptions } from '../src/index.js';
import { HEAP_ALIGN, Heap, alignUp } from '../src/runtime/heap.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';

const PAGE = 65536;

function smallHeap(pages = 2, maxPages = 8, base = 100): Heap {
  const mem = new WebAssembly.Memory({ initial: pages, maximum: maxPages, shared: true });
  return new Heap(mem, base, maxPages * PAGE);
}

describe('Heap', () => {
  it('every block is aligned to at least 64 bytes, blocks never overlap', () => {
    const h = smallHeap();
    expect(HEAP_ALIGN).toBeGreaterThanOrEqual(64);
    const sizes = [1, 3, 63, 64, 65, 100, 1000, 0, 7, 129];
    const blocks = sizes.map((s) => [h.alloc(s), s] as const);
    for (const [p] of blocks) expect(p % 64).toBe(0);
    const sorted = [...blocks].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++) {
      expect(sorted[i][0]).toBeGreaterThanOrEqual(sorted[i - 1][0] + Math.max(sorted[i - 1][1], 1));
    }
    expect(new Set(blocks.map(([p]) => p)).size).toBe(sizes.length);
  });

  it('the first block starts at the base rounded up to the alignment', () => {
    const h = smallHeap(2, 8, 100);
    expect(h.alloc(8)).toBe(alignUp(100, HEAP_ALIGN));
  });

  it('usedBytes counts live blocks at their aligned size', () => {
    const h = smallHeap();
    const a = h.alloc(1);
    const b = h.alloc(65);
    expect(h.usedBytes).toBe(64 + 128);
    h.release(a);
    expect(h.usedBytes).toBe(128);
    h.release(b);
    expect(h.usedBytes).toBe(0);
  });

  it('a freed block is reused (first fit) and split', () => {
    const h = smallHeap();
    const a = h.alloc(256);
    const guard = h.alloc(64);
    h.release(a);
    const b = h.alloc(64);
    const c = h.alloc(100);
    expect(b).toBe(a);
    expect(c).toBe(a + 64);
    const d = h.alloc(64); // the remaining 64 bytes of the old block
    expect(d).toBe(a + 192);
    expect(h.alloc(64)).toBeGreaterThan(guard);
  });

  it('an exact-size free block is reused whole', () => {
    const h = smallHeap();
    const a = h.alloc(128);
    h.alloc(64);
    h.release(a);
    expect(h.alloc(128)).toBe(a);
    expect(h.alloc(64)).toBeGreaterThan(a + 128);
  });

  it('freed neighbours coalesce (prev, next and both)', () => {
    const h = smallHeap();
    const [a, b, c] = [h.alloc(64), h.alloc(64), h.alloc(64)];
    h.alloc(64); // guard: keeps the three off the top
    h.release(a);
    h.release(c);
    h.release(b); // joins a (prev) and c (next)
    expect(h.alloc(192)).toBe(a);
  });

  it('coalescing also works when freed in address order', () => {
    const h = smallHeap();
    const [a, b, c] = [h.alloc(64), h.alloc(128), h.alloc(64)];
    h.alloc(64);
    h.release(a);
    h.release(b);
    h.release(c);
    expect(h.alloc(256)).toBe(a);
  });

  it('freeing the top block lowers the top, swallowing an adjacent free block', () => {
    const h = smallHeap();
    const a = h.alloc(64);
    const b = h.alloc(64);
    const c = h.alloc(64);
    h.release(b); // into the free list
    h.release(c); // top: comes down over b too
    const big = h.alloc(4096);
    expect(big).toBe(b);
    expect(a).toBeLessThan(b);
  });

  it('double free and foreign pointers are invalid_arguments', () => {
    const h = smallHeap();
    const a = h.alloc(64);
    h.release(a);
    expectDnnlError(() => h.release(a), 'invalid_arguments', `free: 0x${a.toString(16)} is not a live allocation of this engine`);
    const b = h.alloc(128);
    expectDnnlError(() => h.release(b + 64), 'invalid_arguments', 'is not a live allocation');
    expectDnnlError(() => h.release(12345), 'invalid_arguments', 'free: 0x3039 is not a live allocation');
  });

  it('sizes must be non-negative integers', () => {
    const h = smallHeap();
    expectDnnlError(() => h.alloc(-1), 'invalid_arguments', 'alloc: buffer size must be a non-negative integer, got -1');
    expectDnnlError(() => h.alloc(1.5), 'invalid_arguments', 'got 1.5');
    expectDnnlError(() => h.alloc(Number.NaN), 'invalid_arguments', 'got NaN');
    expectDnnlError(() => h.alloc(-1, 'weights'), 'invalid_arguments', 'alloc: weights size must be');
  });

  it('out_of_memory past maxBytes; the heap stays usable and freeing makes room', () => {
    const h = smallHeap(1, 4, 0);
    const a = h.alloc(3 * PAGE);
    const err = expectDnnlError(() => h.alloc(2 * PAGE), 'out_of_memory', `does not fit: engine heap limit is ${4 * PAGE} bytes, ${3 * PAGE} in use`);
    expect(err.message).toContain(`of ${2 * PAGE} bytes`);
    expect(h.alloc(PAGE)).toBe(3 * PAGE);
    h.release(a);
    expect(h.alloc(2 * PAGE)).toBe(0);
  });

  it('out_of_memory when the underlying memory refuses to grow', () => {
    const mem = new WebAssembly.Memory({ initial: 1, maximum: 2, shared: true });
    const h = new Heap(mem, 0, 8 * PAGE); // the limit says 8 pages, the memory allows 2
    expectDnnlError(() => h.alloc(3 * PAGE), 'out_of_memory', `alloc: buffer of ${3 * PAGE} bytes: the engine heap could not grow to ${3 * PAGE} bytes`);
    expect(h.alloc(PAGE)).toBe(0);
  });

  it('grows on demand; views taken before growth stay valid', () => {
    const h = smallHeap(1, 16, 0);
    const a = h.alloc(1024);
    const view = new Float32Array(h.memory.buffer, a, 256);
    view.fill(3.5);
    const before = h.byteLength;
    const b = h.alloc(5 * PAGE);
    expect(h.byteLength).toBeGreaterThan(before);
    expect(h.byteLength).toBeGreaterThanOrEqual(b + 5 * PAGE);
    expect(view.every((v) => v === 3.5)).toBe(true);
    expect(new Float32Array(h.memory.buffer, a, 256).every((v) => v === 3.5)).toBe(true);
  });

  it('isLive and owningBlock', () => {
    const h = smallHeap(2, 8, 0);
    const a = h.alloc(128);
    const b = h.alloc(64);
    expect(h.isLive(a)).toBe(true);
    expect(h.isLive(a + 64)).toBe(false);
    expect(h.owningBlock(a + 64, 64)).toEqual({ start: a, size: 128 });
    expect(h.owningBlock(a + 64, 65)).toBeUndefined();
    expect(h.owningBlock(b, 64)).toEqual({ start: b, size: 64 });
    h.release(b);
    expect(h.owningBlock(b, 1)).toBeUndefined();
    expect(h.owningBlock(a, 128)).toEqual({ start: a, size: 128 });
  });
});

describe('Engine heap limits', () => {
  // kernels: 'none' so that nothing but the test allocates in the heap (no kernel stack): exact accounting.
  it('out_of_memory from Memory.create with a small maxBytes engine, then recovery after free', async () => {
    const eng = await Engine.create({ threads: 1, kernels: 'none', maxBytes: 4 << 20 });
    const md = memory.desc([1 << 20], dt.f32, tag.x); // 4 MiB: more than the heap minus its reserved low 1 MiB
    expectDnnlError(() => Memory.create(md, eng), 'out_of_memory', 'engine heap limit is 4194304 bytes');
    const half = memory.desc([(3 << 20) / 8], dt.f32, tag.x); // 1.5 MiB
    const a = Memory.create(half, eng);
    const b = Memory.create(half, eng);
    expectDnnlError(() => Memory.create(half, eng), 'out_of_memory', 'does not fit');
    a.free();
    const c = Memory.create(half, eng);
    expect(c.handles[0]).toBe(a.handles[0]);
    b.free();
    c.free();
    expect(eng.heap.usedBytes).toBe(0);
    eng.release();
  });

  it('out_of_memory from a grouped memory whose offsets no longer fit frees the values buffer', async () => {
    const eng = await Engine.create({ threads: 1, kernels: 'none', maxBytes: 2 << 20 });
    const filler = Memory.create(memory.desc([(1 << 20) / 4 - 16], dt.f32, tag.x), eng);
    const md = memory.desc.grouped([16, 1], dt.f32, 4, [4, 1]);
    expect(eng.heap.usedBytes).toBe(filler.desc.getSize());
    expectDnnlError(() => Memory.create(md, eng), 'out_of_memory', 'does not fit');
    expect(eng.heap.usedBytes).toBe(filler.desc.getSize());
    filler.free();
    eng.release();
  });

  it('out_of_memory on an engine with kernels (whose stack lives in the heap too)', async () => {
    const eng = await Engine.create({ threads: 1, maxBytes: 4 << 20 });
    const base = eng.heap.usedBytes;
    expectDnnlError(() => Memory.create(memory.desc([(3 << 20) / 4], dt.f32, tag.x), eng), 'out_of_memory', 'engine heap limit is 4194304 bytes');
    expect(eng.heap.usedBytes).toBe(base);
    const ok = Memory.create(memory.desc([(2 << 20) / 4], dt.f32, tag.x), eng);
    expect(eng.heap.usedBytes).toBe(base + (2 << 20));
    ok.free();
    eng.release();
  });

  it('the heap grows past initialBytes; earlier memory views stay valid', async () => {
    const eng = await Engine.create({ threads: 1, initialBytes: 2 << 20, maxBytes: 64 << 20 });
    const a = Memory.create(memory.desc([1000], dt.f32, tag.x), eng);
    a.write(new Array<number>(1000).fill(7));
    const view = a.values;
    const start = eng.buffer.byteLength;
    const big = Memory.create(memory.desc([4 << 20], dt.f32, tag.x), eng);
    expect(eng.buffer.byteLength).toBeGreaterThan(start);
    expect(view.every((v) => v === 7)).toBe(true);
    expect(a.read().every((v) => v === 7)).toBe(true);
    big.free();
    a.free();
    eng.release();
  });
});

describe('Engine: one test per invalid-argument rule', () => {
  it('threads must be an integer in [1, 256]', async () => {
    await expectDnnlReject(Engine.create({ threads: 0 }), 'invalid_arguments', 'Engine.create: threads must be an integer in [1, 256], got 0');
    await expectDnnlReject(Engine.create({ threads: 257 }), 'invalid_arguments', 'got 257');
    await expectDnnlReject(Engine.create({ threads: 1.5 }), 'invalid_arguments', 'got 1.5');
  });

  it('maxBytes must exceed the reserved low 1 MiB and stay within 4 GiB - 64 KiB', async () => {
    await expectDnnlReject(Engine.create({ maxBytes: 1 << 20 }), 'invalid_arguments', 'Engine.create: maxBytes must be in (1048576, 4294901760], got 1048576');
    await expectDnnlReject(Engine.create({ maxBytes: 2 ** 32 }), 'invalid_arguments', 'maxBytes must be in');
  });

  it('initialBytes must be a positive integer', async () => {
    await expectDnnlReject(Engine.create({ initialBytes: 0 }), 'invalid_arguments', 'Engine.create: initialBytes must be a positive integer, got 0');
  });

  it('kernels must be auto, simd128, relaxed or none', async () => {
    const bad = 'avx512' as unknown as EngineOptions['kernels'];
    await expectDnnlReject(Engine.create({ threads: 1, kernels: bad }), 'invalid_arguments', "Engine.create: kernels must be 'auto', 'simd128', 'relaxed' or 'none', got 'avx512'");
  });

  it('an engine cannot allocate or free after release()', async () => {
    const eng = await Engine.create({ threads: 1 });
    const h = eng.alloc(64);
    eng.release();
    expect(eng.isReleased).toBe(true);
    expectDnnlError(() => eng.alloc(64), 'invalid_arguments', 'engine: used after release()');
    expectDnnlError(() => eng.free(h), 'invalid_arguments', 'engine: used after release()');
    expectDnnlError(() => Memory.create(memory.desc([4], dt.f32, tag.x), eng), 'invalid_arguments', 'engine: used after release()');
  });
});
