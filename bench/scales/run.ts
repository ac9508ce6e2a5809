/**
 * Runs one recipe through the library's grouped matmul (RFC Proposal #1: grouped src/dst
 * descriptors, plain [E, K, N] weights, scales / zero points as attributes per RFC 0002).
 */
import {
  ARG, DnnlError, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, matmul, memory, offsets, reorder, tag, type Engine,
} from '../../src/index.js';
import type { AttrTensor, QTensor } from './quantize.js';
import type { Workload } from './data.js';

/** Scale/zero-point attribute calls, in the order they are made (also printed in the report). */
export interface AttrCall {
  readonly what: 'scales' | 'zero_points';
  readonly arg: 'SRC' | 'WEIGHTS' | 'DST';
  readonly t: AttrTensor;
}

export interface Prepared {
  readonly src: QTensor;
  readonly wei: QTensor;
  readonly calls: readonly AttrCall[];
}

export type RunOutcome =
  | {
    readonly ok: true;
    readonly implInfo: string;
    readonly dst: Float32Array;
    readonly firstMs: number;
    /** Engine heap bytes held by the recipe's memory objects until `release()`. */
    readonly heapBytes: number;
    /** Bytes of the weights as the matmul reads them (the packed layout's size when packed). */
    readonly weightBytes: number;
    /** Bytes of the weights' scales / zero points memories stored inside the packed weights (`+q`): counted in weightBytes. */
    readonly embedded: { readonly scales: number; readonly zeroPoints: number };
    readonly exec: () => Promise<void>;
    readonly release: () => void;
  }
  | { readonly ok: false; readonly stage: 'pd' | 'execute' | 'setup'; readonly message: string };

/** A hung execution fails the recipe instead of the whole run. */
const WATCHDOG_MS = 120_000;

const ARG_ID = { SRC: ARG.SRC, WEIGHTS: ARG.WEIGHTS, DST: ARG.DST } as const;

const plainTag = (n: number): string => 'abcdefghijkl'.slice(0, n);

function errorText(e: unknown): string {
  if (e instanceof DnnlError) return e.message;
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** Renders the attribute calls as code, e.g. `setScales(SRC, 3, [1,128], f32)`. */
export function attrCallString(c: AttrCall): string {
  const fn = c.what === 'scales' ? 'setScales' : 'setZeroPoints';
  const groups = c.t.groups.length ? `[${c.t.groups.join(',')}]` : '[]';
  return `${fn}(${c.arg}, ${c.t.mask}, ${groups}, ${c.t.dt})`;
}

function applyCall(attr: PrimitiveAttr, c: AttrCall): void {
  if (c.what === 'scales') attr.setScales(ARG_ID[c.arg], c.t.mask, [...c.t.groups], c.t.dt);
  else attr.setZeroPoints(ARG_ID[c.arg], c.t.mask, [...c.t.groups], c.t.dt);
}

/**
 * Creates the pd, memory objects and primitive for a prepared recipe, runs it once, and returns the
 * result plus a closure that re-executes it (for timing). Library errors become a failed outcome
 * carrying the library's message.
 */
export async function runRecipe(eng: Engine, w: Workload, prep: Prepared, packed = false): Promise<RunOutcome> {
  const { E, K, N } = w.opts;
  const M = w.totalM;
  const strm = new Stream(eng);
  let pd: matmul.PrimitiveDesc;
  const srcMd = memory.desc.grouped([M, K], prep.src.dt, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([M, N], 'f32', E, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([E, K, N], prep.wei.dt, tag.abc);
  try {
    const attr = new PrimitiveAttr();
    for (const c of prep.calls) applyCall(attr, c);
    pd = new matmul.PrimitiveDesc(eng, srcMd, packed ? memory.desc([E, K, N], prep.wei.dt, tag.any) : weiMd, dstMd, attr);
  } catch (e) {
    return { ok: false, stage: 'pd', message: errorText(e) };
  }
  const owned: Memory[] = [];
  const release = (): void => owned.forEach((m) => m.free());
  try {
    const src = Memory.create(srcMd, eng);
    owned.push(src);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    owned.push(dst);
    let wei = Memory.create(weiMd, eng);
    offsets.fromSizes(w.sizes, src.offsets);
    src.bytes(0).set(prep.src.bytes);
    wei.bytes(0).set(prep.wei.bytes);
    const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.DST]: dst };
    for (const c of prep.calls) {
      const md = memory.desc([...c.t.dims], c.t.dt, plainTag(c.t.dims.length));
      const m = Memory.create(md, eng);
      owned.push(m);
      m.bytes(0).set(c.t.bytes);
      args[(c.what === 'scales' ? ARG.ATTR_SCALES : ARG.ATTR_ZERO_POINTS) | ARG_ID[c.arg]] = m;
    }
    const embedded = { scales: 0, zeroPoints: 0 };
    if (packed) { // reorder into the pd's layout (with the weights' scales / zero points when it stores them); the plain copy is freed
      const plain = wei;
      wei = Memory.create(pd.queryMd('weights')!, eng);
      const r: Record<number, Memory> = { [ARG.FROM]: plain, [ARG.TO]: wei };
      const q = wei.desc.packed?.quant;
      for (const [kind, base] of [['scales', ARG.ATTR_SCALES], ['zeroPoints', ARG.ATTR_ZERO_POINTS]] as const) {
        if (!q?.[kind]) continue;
        r[base | ARG.WEIGHTS] = args[base | ARG.WEIGHTS];
        embedded[kind] = args[base | ARG.WEIGHTS].desc.getSize(0);
        delete args[base | ARG.WEIGHTS];
      }
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc)).execute(strm, r);
      await strm.wait();
      plain.free();
    }
    owned.push(wei);
    args[ARG.WEIGHTS] = wei;
    const prim = new matmul.Primitive(pd);
    const exec = async (): Promise<void> => {
      prim.execute(strm, args);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const watchdog = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`execution did not finish within ${WATCHDOG_MS / 1000} s`)), WATCHDOG_MS);
      });
      try {
        await Promise.race([strm.wait(), watchdog]);
      } finally {
        clearTimeout(timer);
      }
    };
    (dst.values as Float32Array).fill(NaN);
    const t0 = performance.now();
    try {
      await exec();
    } catch (e) {
      release();
      return { ok: false, stage: 'execute', message: errorText(e) };
    }
    const firstMs = performance.now() - t0;
    const heapBytes = owned.reduce((sum, m) => sum + m.desc.getSize(0) + (m.desc.isGrouped && m !== dst ? m.desc.getSize(1) : 0), 0);
    return { ok: true, implInfo: pd.implInfo, dst: Float32Array.from(dst.values as Float32Array), firstMs, heapBytes, weightBytes: wei.desc.getSize(0), embedded, exec, release };
  } catch (e) {
    release();
    return { ok: false, stage: 'setup', message: errorText(e) };
  }
}
