import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, algorithm, dt, getVerbose, matmul, memory, PrimitiveAttr, setVerbose, setVerboseSink, tag,
} from '../src/index.js';
import { setupGroupedM } from './helpers.js';

const RT = RUNTIME_DIM_VAL;
let eng: Engine;
let ref: Engine;
beforeAll(async () => {
  eng = await Engine.create({ threads: 1 });
  ref = await Engine.create({ threads: 1, kernels: 'none' });
});
afterAll(() => {
  eng.release();
  ref.release();
});

let restoreLevel = 0;
let restoreSink: ((line: string) => void) | undefined;
function capture(level = 1): string[] {
  const lines: string[] = [];
  restoreLevel = setVerbose(level);
  restoreSink = setVerboseSink((l) => lines.push(l));
  return lines;
}
afterEach(() => {
  setVerbose(restoreLevel);
  if (restoreSink) setVerboseSink(restoreSink);
  restoreSink = undefined;
});

describe('verbose', () => {
  it('setVerbose returns the previous level; getVerbose reads it', () => {
    const prev = setVerbose(1);
    expect(getVerbose()).toBe(1);
    expect(setVerbose(0)).toBe(1);
    expect(getVerbose()).toBe(0);
    setVerbose(prev);
  });

  it('setVerboseSink returns the previous sink', () => {
    const mine = (): void => undefined;
    const prev = setVerboseSink(mine);
    expect(setVerboseSink(prev)).toBe(mine);
  });

  it('level 0 prints nothing', async () => {
    const lines = capture(0);
    const f = setupGroupedM(eng, { G: 3, K: 4, N: 6, sizes: [2, 3, 4] });
    const s = new Stream(eng);
    f.prim.execute(s, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    await s.wait();
    expect(lines).toEqual([]);
    f.free();
  });

  it('level 1: one creation line and one line per execution, with descriptors, groups and time', async () => {
    const lines = capture(1);
    const f = setupGroupedM(eng, { G: 3, K: 4, N: 6, sizes: [2, 0, 4], totalM: 7, postOps: [{ kind: 'relu', alpha: 0 }] });
    expect(lines).toHaveLength(1);
    const create = lines[0].split(',');
    expect(create.slice(0, 5)).toEqual(['groupdnn_verbose', 'primitive', 'create:cache_miss', 'cpu', 'matmul']);
    expect(create[5]).toBe(f.pd.implInfo);
    expect(lines[0]).toContain('src:f32::grouped:ab:g3:var_dim0:offs_s32::f0 7x4');
    expect(lines[0]).toContain('wei:f32::blocked:abc::f0 3x4x6');
    expect(lines[0]).toContain('dst:f32::grouped:ab:g3:var_dim0:offs_s32::f0 7x6');
    expect(lines[0]).toContain('attr-post-ops:eltwise_relu:0:0');
    expect(lines[0]).toContain('g3:7x4:3x4x6');
    expect(Number.isFinite(Number(create[create.length - 1]))).toBe(true);
    const s = new Stream(eng);
    f.prim.execute(s, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    f.prim.execute(s, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    await s.wait();
    expect(lines).toHaveLength(3);
    const exec = lines[1].split(',');
    expect(exec.slice(0, 5)).toEqual(['groupdnn_verbose', 'primitive', 'exec', 'cpu', 'matmul']);
    expect(lines[1]).toContain('groups:2+0+4');
    expect(Number(exec[exec.length - 1])).toBeGreaterThanOrEqual(0);
    f.free();
  });

  it('the groups field is truncated after 64 groups', async () => {
    const G = 70;
    const sizes = Array.from({ length: G }, (_, i) => i % 2);
    const f = setupGroupedM(eng, { G, K: 2, N: 2, sizes });
    const lines = capture(1);
    const s = new Stream(eng);
    f.prim.execute(s, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    await s.wait();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`groups:${sizes.slice(0, 64).join('+')}+...`);
    f.free();
  });

  it('a variable-K execution reports its groups too', async () => {
    const srcMd = memory.desc.grouped([3, 5], dt.f32, 2, [3, RT]);
    const weiMd = memory.desc.grouped([5, 4], dt.f32, 2, [RT, 4]);
    const dstMd = memory.desc([2, 3, 4], dt.f32, tag.abc);
    const lines = capture(1);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
    const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng);
    const wei = Memory.create(weiMd, eng, [undefined, src.handles[1]]);
    src.offsets.set([0, 1, 5]);
    const s = new Stream(eng);
    new matmul.Primitive(pd).execute(s, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await s.wait();
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('var_dim1');
    expect(lines[1]).toContain('groups:1+4');
    [src, wei, dst].forEach((m) => m.free());
  });

  it('implInfo names the wasm kernels when the engine has them, the reference otherwise', () => {
    const md = memory.desc([4, 4], dt.f32, tag.ab);
    expect(new matmul.PrimitiveDesc(eng, md, md, md).implInfo).toMatch(/^wasm:(simd128|relaxed):/);
    expect(new matmul.PrimitiveDesc(ref, md, md, md).implInfo).toBe('ref:any');
    // A post-op chain the kernels reject (more than 8 post-ops) falls back to the reference on the kernel engine.
    const attr = new PrimitiveAttr();
    for (let i = 0; i < 9; i++) attr.postOps.appendEltwise(algorithm.eltwise_gelu_erf);
    expect(new matmul.PrimitiveDesc(eng, md, md, md, attr).implInfo).toBe('ref:any');
  });

  it('GROUPDNN_VERBOSE=1 in the environment turns verbose on at load', async () => {
    vi.stubEnv('GROUPDNN_VERBOSE', '1');
    vi.resetModules();
    try {
      const fresh = await import('../src/index.js');
      expect(fresh.getVerbose()).toBe(1);
    } finally {
      vi.unstubAllEnvs();
      vi.resetModules();
    }
  });

  it('a non-numeric GROUPDNN_VERBOSE means off', async () => {
    vi.stubEnv('GROUPDNN_VERBOSE', 'yes');
    vi.resetModules();
    try {
      const fresh = await import('../src/index.js');
      expect(fresh.getVerbose()).toBe(0);
    } finally {
      vi.unstubAllEnvs();
      vi.resetModules();
    }
  });
});
