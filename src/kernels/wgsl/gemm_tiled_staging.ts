import type { DataType } from '../../common/data_type.js';
import { fusionDequantB, hoistDeclWgsl, hoistSetWgsl, staticHoist } from './gemm_fusion.js';
import { fusionOperands } from './wgsl_quant.js';
import { gemmThreadTuning, gemmThreads, vecOf, type GemmThreads } from './gemm_threads.js';
import type { GemmTiledConfig } from './gemm_tiled.js';

/**
 * How `gemm-tiled` stages its K slices into workgroup memory (the K loop around the FMA loop):
 *  - B as scalars: each thread loads wb columns TN / wb apart at a k row, one element (and, quantized,
 *    one word and its decode) per load;
 *  - B in chunks (`bChunk` = V, set by the host where the weights strides allow it): one load brings V
 *    consecutive columns of a k row, a vec4 of f32 or a u32 word of 4 bytes / 8 nibbles, decoded into
 *    V values once and written as whole vectors of the `runs` thread layout (gemm_threads.ts): a
 *    4-bit tile of 64 columns takes one load per thread and slice instead of eight;
 *  - register prefetch (both): the next slice's global loads are issued into registers before the
 *    current slice is multiplied, and written to workgroup memory after it (one buffer, no second
 *    barrier); quantized chunks stay raw in registers until then so the decode does not wait for the
 *    load ahead of the FMAs. Only where a thread stages few registers (at most two A runs and two B
 *    rows or four chunks): the unrolled staging of larger ones makes WGSL that SwiftShader compiles
 *    slowly; they keep the plain loop.
 */

/** Values per chunked weights load: f32 (a vec4), s8 / u8 (a word of 4 bytes), s4 / u4 (8 nibbles). */
export function chunkWidth(wei: DataType): number {
  return wei === 's4' || wei === 'u4' ? 8 : wei === 'f32' || wei === 's8' || wei === 'u8' ? 4 : 0;
}

/** What the staging plan depends on. */
export type StagingShape = Pick<GemmTiledConfig, 'tm' | 'tn' | 'bk' | 'bChunk' | 'fusion'>;

/** Per-thread staging counts of a config: A runs, B rows (scalar) or chunks per slice. */
function stagingCounts(c: StagingShape, th: GemmThreads): { aRuns: number; aIters: number; bPer: number; bIters: number } {
  const aRuns = (c.bk * c.tm) / th.wa;
  // B loads per k row: vectors of wb columns, or chunks of V columns.
  const bPer = c.bChunk ? c.tn / c.bChunk : c.tn / th.wb;
  return { aRuns, aIters: Math.ceil(aRuns / th.threads), bPer, bIters: Math.ceil(c.bk / (th.threads / bPer)) };
}

/** Whether the config stages with register prefetch. */
export function gemmPrefetch(c: StagingShape): boolean {
  const { aIters, bIters } = stagingCounts(c, gemmThreads(c));
  // A chunk is one register (a word, or a vec4 of f32): four of them stage no more than two scalar B rows.
  return gemmThreadTuning.prefetch && aIters <= 2 && bIters <= (c.bChunk ? 4 : 2);
}

/** The staging's part of the pipeline key and of implInfo (`-ch8-pf`). */
export function stagingKey(c: StagingShape): string {
  return `${c.bChunk ? `-ch${c.bChunk}` : ''}${gemmPrefetch(c) ? '-pf' : ''}`;
}

/** The WGSL element type of the weights binding (chunked f32: vec4). */
export function weightsArrayType(c: GemmTiledConfig, plain: string): string {
  return c.bChunk && c.wei === 'f32' ? 'vec4<f32>' : plain;
}

export interface StagingParts {
  readonly c: GemmTiledConfig;
  /** The staged / accumulated scalar type and its zero. */
  readonly T: string;
  readonly zero: string;
  /** Statements setting `v` to the (dequantized) src element at (r, k). */
  readonly loadA: string;
  /** Statements setting `v` to the (dequantized) weights element at (k, col), hoisted operands of lane `e` (scalar B). */
  readonly loadB: (e: number) => string;
  /** Weights scales / zero points held in registers per column, reloaded where a K block starts (gemm_fusion.ts). */
  readonly hoist: boolean;
}

/** The K loop: thread constants, then per slice the staging, a barrier, `inner` (the FMA loop), a barrier. */
export function kLoopWgsl(s: StagingParts, inner: string): string {
  const { c } = s;
  const th = gemmThreads(c);
  const { aRuns, aIters, bPer, bIters } = stagingCounts(c, th);
  const NT = th.threads;
  if (NT % bPer !== 0 || !Number.isInteger(aRuns)) throw new Error(`gemm-tiled: ${NT} threads do not stage a ${c.tm} x ${c.tn} x ${c.bk} tile`);
  const a = stageA(s, th, aRuns, aIters);
  const b = c.bChunk ? stageBChunks(s, th, bPer, bIters) : stageBScalar(s, th, bPer, bIters);
  if (gemmPrefetch(c)) {
    return `${a.consts}${b.consts}
  ${a.regs} ${b.regs}
  var kb = k0;
  if (kb < k1) {${a.load('kb')}${b.load('kb')}
  }
  loop {
    if (kb >= k1) { break; }${a.store}${b.store('kb')}
    workgroupBarrier();
    let kn = kb + ${c.bk}u;
    if (kn < k1) {${a.load('kn')}${b.load('kn')}
    }${inner}
    workgroupBarrier();
    kb = kn;
  }`;
  }
  return `${b.consts}
  for (var kb = k0; kb < k1; kb += ${c.bk}u) {${a.loop}${b.loop}
    workgroupBarrier();${inner}
    workgroupBarrier();
  }`;
}

interface StageCode {
  /** Prefetch registers. */
  readonly regs: string;
  /** Prefetch: loads of the slice at `KB` into the registers. */
  readonly load: (KB: string) => string;
  /** Prefetch: the registers into workgroup memory. */
  readonly store: string;
  /** Without prefetch: the whole slice, loaded and stored in a loop. */
  readonly loop: string;
}

function lanes(pre: string, w: number): string {
  return Array.from({ length: w }, (_, e) => `${pre}${e}`).join(', ');
}

/**
 * A: runs of wa rows at one k per thread and iteration (q: run index = row run * BK + k). With
 * prefetch a thread's rows are the same in every slice: their src rows (a gather's token index read)
 * and range checks are thread constants.
 */
function stageA(s: StagingParts, th: GemmThreads, aRuns: number, aIters: number): StageCode & { consts: string } {
  const { c, T, zero, loadA } = s;
  const { wa } = th, NT = th.threads, bk = c.bk;
  const lda = (c.tm + 4) / wa;
  const gather = c.rows?.gather;
  const guard = aRuns % NT !== 0 ? `q < ${aRuns}u && ` : '';
  const consts = Array.from({ length: aIters }, (_, i) => `
  ${Array.from({ length: wa }, (_, e) => `var ar${i}_${e} = 0u; var ao${i}_${e} = false;`).join(' ')}
  { let q = li + ${NT * i}u; let mq = (q / ${bk}u) * ${wa}u;${Array.from({ length: wa }, (_, e) => gather ? `
    { let rr = m0 + mq + ${e}u; if (${guard}rr < m1) { let t = TI[rr]; ar${i}_${e} = u32(max(t, 0)); ao${i}_${e} = t >= 0; } }` : `
    ar${i}_${e} = m0 + mq + ${e}u; ao${i}_${e} = ${guard}ar${i}_${e} < m1;`).join('')}
  }`).join('');
  const regs = Array.from({ length: aIters }, (_, i) => Array.from({ length: wa }, (_, e) => `var ra${i}_${e} = ${zero};`).join(' ')).join(' ');
  const load = (KB: string): string => Array.from({ length: aIters }, (_, i) => `
      { let k = ${KB} + (li + ${NT * i}u) % ${bk}u;${Array.from({ length: wa }, (_, e) => `
        ra${i}_${e} = ${zero}; if (ao${i}_${e} && k < k1) { let r = ar${i}_${e}; var v = ${zero}; ${loadA} ra${i}_${e} = v; }`).join('')}
      }`).join('');
  const store = Array.from({ length: aIters }, (_, i) => `
    { let q = li + ${NT * i}u; ${guard ? `if (q < ${aRuns}u) ` : ''}{ As[(q % ${bk}u) * ${lda}u + q / ${bk}u] = ${vecOf(T, wa)}(${lanes(`ra${i}_`, wa)}); } }`).join('');
  const loop = `
    for (var q = li; q < ${aRuns}u; q += ${NT}u) {
      let mq = (q / ${bk}u) * ${wa}u; let k = kb + q % ${bk}u;${Array.from({ length: wa }, (_, e) => `
      var x${e} = ${zero};
      { ${gather ? `let rr = m0 + mq + ${e}u;
        if (rr < m1 && k < k1 && TI[rr] >= 0) { let r = u32(TI[rr]); var v = ${zero}; ${loadA} x${e} = v; }` : `let r = m0 + mq + ${e}u;
        if (r < m1 && k < k1) { var v = ${zero}; ${loadA} x${e} = v; }`} }`).join('')}
      As[(q % ${bk}u) * ${lda}u + q / ${bk}u] = ${vecOf(T, wa)}(${lanes('x', wa)});
    }`;
  return { consts, regs, load, store, loop };
}

/** Thread constants of B, staging code taking the slice start. */
interface StageBCode {
  readonly consts: string;
  readonly regs: string;
  readonly load: (KB: string) => string;
  readonly store: (KB: string) => string;
  readonly loop: string;
}

/** GEMM column of tile column `n` (a WGSL u32 expression) in `col`, P.N where it has no dst column (GLU). */
function colDeclWgsl(c: GemmTiledConfig, name: string, n: string): string {
  const half = c.tn / 2;
  return c.fusion?.glu ? `
  let cd_${name} = n0 + (${n}) % ${half}u; let ${name} = select(P.N, glu_col(cd_${name}, (${n}) / ${half}u), cd_${name} < Q[0].x);` : `
  let ${name} = n0 + ${n};`;
}

/** B as scalars: this thread's wb columns (fixed: NT is a multiple of TN / wb), one element per load. */
function stageBScalar(s: StagingParts, th: GemmThreads, slots: number, bIters: number): StageBCode {
  const { c, T, zero, loadB, hoist } = s;
  const { wb } = th, NT = th.threads, bk = c.bk, f = c.fusion;
  const rows = NT / slots;
  const consts = Array.from({ length: wb }, (_, e) => colDeclWgsl(c, `col${e}`, `li % ${slots}u + ${(e * c.tn) / wb}u`)).join('') +
    (hoist && f ? `
  ${Array.from({ length: wb }, (_, e) => hoistDeclWgsl(f, e)).join(' ')}` : '');
  const hoistSet = (KB: string): string => (hoist && f ? `
      ${hoistSetWgsl(f, Array.from({ length: wb }, (_, e) => ({ lane: e, col: `col${e}` })), KB, c.weiKBlocks)}` : '');
  const one = (dst: (e: number) => string, guard: string): string => Array.from({ length: wb }, (_, e) => `
          ${dst(e)} = ${zero};
          { let col = col${e};
            if (${guard}k < k1 && col < P.N) { var v = ${zero}; ${loadB(e)} ${dst(e)} = v; } }`).join('');
  const guard = bk % rows !== 0 ? `kk < ${bk}u && ` : '';
  const regs = Array.from({ length: bIters }, (_, i) => Array.from({ length: wb }, (_, e) => `var rb${i}_${e} = ${zero};`).join(' ')).join(' ');
  const load = (KB: string): string => `${hoistSet(KB)}${Array.from({ length: bIters }, (_, i) => `
      { let kk = li / ${slots}u + ${i * rows}u; let k = ${KB} + kk;${one((e) => `rb${i}_${e}`, guard)}
      }`).join('')}`;
  const store = (): string => Array.from({ length: bIters }, (_, i) => `
    { let kk = li / ${slots}u + ${i * rows}u; ${guard ? `if (kk < ${bk}u) ` : ''}{ Bs[kk * ${slots}u + li % ${slots}u] = ${vecOf(T, wb)}(${lanes(`rb${i}_`, wb)}); } }`).join('');
  const loop = `${hoistSet('kb')}
    for (var kk = li / ${slots}u; kk < ${bk}u; kk += ${rows}u) {
      let k = kb + kk;${Array.from({ length: wb }, (_, e) => `
      var x${e} = ${zero};`).join('')}${one((e) => `x${e}`, '')}
      Bs[kk * ${slots}u + li % ${slots}u] = ${vecOf(T, wb)}(${lanes('x', wb)});
    }`;
  return { consts, regs, load, store, loop };
}

/**
 * How a raw chunk becomes values: `magic` (f32 staging of integer codes) ORs each code, offset to
 * unsigned (s4 / s8: XOR of the sign bits, once per word), into the mantissa of 2^23 and subtracts
 * 2^23 plus the offset (exact, the same bits as a conversion): a shift, an AND-OR and an FADD instead
 * of two shifts and an integer-to-float conversion; `int` the conversion (the default: on an H200 the
 * trick gained nothing, the decode being ~3% of the MoE-B int4 GEMMs, reports/prefill3-h200.md);
 * `skip` (benchmark only, wrong values) no decode at all, to time the rest.
 */
type DecodeMode = 'magic' | 'int' | 'skip';

function decodeMode(c: Pick<GemmTiledConfig, 'wei' | 'bChunk' | 'fusion'>): DecodeMode | undefined {
  if (!c.bChunk || c.wei === 'f32') return undefined;
  if (gemmThreadTuning.skipDecode) return 'skip';
  return c.fusion?.intAcc || !gemmThreadTuning.magicDecode ? 'int' : 'magic';
}

/** The decode's part of the pipeline key (not of implInfo). */
export function decodeKey(c: Pick<GemmTiledConfig, 'wei' | 'bChunk' | 'fusion'>): string {
  const m = decodeMode(c);
  return m === undefined || m === 'int' ? '' : `:d${m}`;
}

/** Statements before the values of raw chunk `w` are read (magic signed codes: the offset word). */
function decodePrelude(c: GemmTiledConfig, w: string): string {
  return decodeMode(c) === 'magic' && (c.wei === 's4' || c.wei === 's8') ? `let ${w}x = ${w} ^ ${c.wei === 's4' ? '0x88888888u' : '0x80808080u'}; ` : '';
}

/** Value `i` of a raw chunk `w` as T (codes as integers; f32 lanes as they are). */
function decodeWgsl(c: GemmTiledConfig, w: string, i: number, T: string): string {
  const mode = decodeMode(c);
  if (mode === 'skip') return `bitcast<${T}>(${w})`;
  if (mode === 'magic') {
    const bits = c.wei === 's4' || c.wei === 'u4' ? 4 : 8;
    const signed = c.wei === 's4' || c.wei === 's8';
    const x = signed ? `${w}x` : w;
    const field = `${i === 0 ? x : `(${x} >> ${bits * i}u)`} & ${bits === 4 ? 15 : 255}u`;
    return `(bitcast<f32>((${field}) | 0x4b000000u) - ${8388608 + (signed ? 1 << (bits - 1) : 0)}.0)`;
  }
  switch (c.wei) {
    case 'f32': return `${w}[${i}]`;
    case 's4': return `${T}(bitcast<i32>(${w} << ${28 - 4 * i}u) >> 28u)`;
    case 'u4': return `${T}((${w} >> ${4 * i}u) & 15u)`;
    case 's8': return `${T}(bitcast<i32>(${w} << ${24 - 8 * i}u) >> 24u)`;
    case 'u8': return `${T}((${w} >> ${8 * i}u) & 255u)`;
    default: throw new Error(`gemm-tiled: ${c.wei} weights have no chunked staging`);
  }
}

/**
 * B in chunks of V consecutive columns: thread li stages chunk li % (TN / V) of k rows li / (TN / V)
 * + i NT / (TN / V); the host guarantees whole chunks (unit column stride, V dividing N, the K and
 * group strides, a GLU half and the window offsets), so a chunk is in or out of range as a whole.
 */
function stageBChunks(s: StagingParts, th: GemmThreads, perRow: number, cIters: number): StageBCode {
  const { c, T, zero, hoist } = s;
  const V = c.bChunk!, f = c.fusion, NT = th.threads, bk = c.bk, { wb } = th;
  const slots = c.tn / wb, rows = NT / perRow;
  const rawZero = c.wei === 'f32' ? 'vec4<f32>()' : '0u';
  const shift = V === 8 ? 3 : 2;
  const R = c.rows;
  const consts = `${colDeclWgsl(c, 'bc', `(li % ${perRow}u) * ${V}u`)}
  let bok = bc < P.N;${hoist && f ? `
  ${Array.from({ length: V }, (_, i) => hoistDeclWgsl(f, `c${i}`)).join(' ')}` : ''}`;
  const hoistSet = (KB: string): string => (hoist && f ? `
      ${hoistSetWgsl(f, Array.from({ length: V }, (_, i) => ({ lane: `c${i}`, col: `bc + ${i}u` })), KB, c.weiKBlocks, { guard: 'bok' })}` : '');
  const guard = bk % rows !== 0 ? `kk < ${bk}u && ` : '';
  const loadOne = (dst: string, KB: string): string =>
    `let k = ${KB} + kk; ${dst} = ${rawZero}; if (${guard}k < k1 && bok) { ${dst} = B[(wBase + k * P.ldwk + bc${R ? ' - P.wOff' : ''}) >> ${shift}u]; }`;
  // Decoded, dequantized and written as V / wb vectors (zero outside the tile's range). Where the
  // dequantization loads nothing per element (no weights operands, or all held in registers), every
  // value is computed and selected, without branches.
  const branchless = !f || (!f.intAcc && (['wsc', 'wzp'] as const).every((b) => !fusionOperands(f).some((o) => o.name === b) || staticHoist(f, b, c.weiKBlocks)));
  const storeOne = (w: string, KB: string): string => {
    const vals = Array.from({ length: V }, (_, i) => {
      const deq = f ? fusionDequantB(f, `c${i}`, `g, bW, k, bc + ${i}u`, c.weiKBlocks) : '';
      return branchless ? `
        var x${i} = ${zero}; { var v = ${decodeWgsl(c, w, i, T)};${deq} x${i} = select(${zero}, v, ok); }` : `
        var x${i} = ${zero}; if (ok) { var v = ${decodeWgsl(c, w, i, T)};${deq} x${i} = v; }`;
    }).join('');
    const vecs = Array.from({ length: V / wb }, (_, j) => `
        Bs[kk * ${slots}u + (li % ${perRow}u) * ${V / wb}u + ${j}u] = ${vecOf(T, wb)}(${Array.from({ length: wb }, (_, e) => `x${j * wb + e}`).join(', ')});`).join('');
    return `let k = ${KB} + kk; let ok = k < k1 && bok; ${decodePrelude(c, w)}${vals}${vecs}`;
  };
  const regs = Array.from({ length: cIters }, (_, i) => `var rw${i} = ${rawZero};`).join(' ');
  const load = (KB: string): string => `${hoistSet(KB)}${Array.from({ length: cIters }, (_, i) => `
      { let kk = li / ${perRow}u + ${i * rows}u; ${loadOne(`rw${i}`, KB)} }`).join('')}`;
  const store = (KB: string): string => Array.from({ length: cIters }, (_, i) => `
    { let kk = li / ${perRow}u + ${i * rows}u; ${guard ? `if (kk < ${bk}u) ` : ''}{ ${storeOne(`rw${i}`, KB)} } }`).join('');
  const loop = `${hoistSet('kb')}
    for (var kk = li / ${perRow}u; kk < ${bk}u; kk += ${rows}u) {
      var w = ${rawZero}; { ${loadOne('w', 'kb')} }
      ${storeOne('w', 'kb')}
    }`;
  return { consts, regs, load, store, loop };
}
