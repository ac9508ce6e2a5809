import type { DataType } from '../../common/data_type.js';
import type { GemmTiledConfig } from './gemm_tiled.js';
import { wgslLoadRw, wgslStore, wgslType } from './wgsl_dtypes.js';
import { biasIndexWgsl, dstIndexWgsl, epilogueRowWgsl } from './gemm_rows.js';
import { colOfWgsl, gemmThreads } from './gemm_threads.js';
import { FUSION_BINDING, fusionOperands, gluColumnWgsl, gluFnWgsl, mapFnWgsl, type FusedOperand, type GemmFusion } from './wgsl_quant.js';

/**
 * rfcs/0002 inside `gemm-tiled`: operands are dequantized while their tile is staged into workgroup
 * memory (`(code - zp) * scale` at the element's logical coordinate), so the inner loop stays a plain
 * FMA loop; the epilogue applies the GLU, the post-op chain in order, then `/ s_dst + zp_dst`.
 * Integer GEMMs stage `code - zp` as i32 and apply the (K-constant) src / weights scales per output.
 *
 * Coordinates passed to the maps (padded to three dims, wgsl_quant.ts): src `(gq, bS, row, k)`,
 * weights `(g, bW, k, col)`, dst and binary `(gq, gq, row, n)`: the first dim is the batch (dense),
 * the group (grouped K dst) or absent (zero stride). `gq` is the group, `g` its expert (gemm_tiled.ts
 * gemmTileWgsl): per-group values of src, dst and binary src1 follow the group under an expert map.
 *
 * The fusion uniform `Q` (binding 6): `Q[0].x` = dst columns; then each operand's map (2 x vec4u).
 */
export function fusionBindingsWgsl(f: GemmFusion, _c: GemmTiledConfig): string {
  const ops = fusionOperands(f);
  const words = 1 + 2 * ops.length;
  let out = `@group(0) @binding(${FUSION_BINDING}) var<uniform> Q: array<vec4u, ${words}>;\n`;
  for (const o of ops) {
    out += `@group(0) @binding(${o.binding}) var<storage, read> ${o.name.toUpperCase()}: array<${wgslType(o.op.dt).array}>;\n`;
    out += mapFnWgsl(o.name, o.op.terms, o.slot);
  }
  if (f.glu) out += gluColumnWgsl(f.glu.layout) + '\n' + gluFnWgsl(f.glu);
  return out;
}

function named(f: GemmFusion, which: keyof GemmFusion): { buf: string; op: FusedOperand } | undefined {
  const short = { srcScale: 'ssc', srcZp: 'szp', weiScale: 'wsc', weiZp: 'wzp', dstScale: 'dsc', dstZp: 'dzp' } as Record<string, string>;
  const op = f[which] as FusedOperand | undefined;
  return op ? { buf: short[which], op } : undefined;
}

/** `load` of operand `buf` at map coordinates `coords`, as f32 or (integer GEMM) i32. */
function operandLoad(o: { buf: string; op: FusedOperand }, coords: string, int: boolean): string {
  const t = wgslType(o.op.dt);
  const i = `ix_${o.buf}(${coords})`;
  if (int) {
    if (!t.loadInt) throw new Error(`gemm-fusion: ${o.op.dt} zero points cannot be staged as i32`);
    return t.loadInt(o.buf.toUpperCase(), i);
  }
  return t.load(o.buf.toUpperCase(), i);
}

/** Statements setting `v` to the staged (dequantized) src element `idx` at (r, k). */
export function fusionLoadA(f: GemmFusion, c: GemmTiledConfig, idx: string): string {
  return stageLoad(f, wgslType(c.src), idx, 'gq, bS, r, k', named(f, 'srcZp'), named(f, 'srcScale'), 'src');
}

/** Statements setting `v` to the staged (dequantized) weights element `idx` at (k, col). */
export function fusionLoadB(f: GemmFusion, c: GemmTiledConfig, idx: string): string {
  return stageLoad(f, wgslType(c.wei), idx, 'g, bW, k, col', named(f, 'weiZp'), named(f, 'weiScale'), 'weights');
}

/**
 * Weights scales / zero points constant over a staged K slice, loaded once per slice and column
 * instead of once per element (an f32 GEMM's dequantization; a K-blocked map's division and load are
 * most of a 4-bit element's staging cost): a map without a K term always, a K-blocked one when its
 * block is a multiple of BK and the K range starts on a slice (`hoist_<buf>`, uniform per workgroup).
 */
export function hoistedWeightOperands(f: GemmFusion): ('wsc' | 'wzp')[] {
  if (f.intAcc) return [];
  return (['weiScale', 'weiZp'] as const).filter((k) => f[k] && f[k].terms.dims[1] !== 'u').map((k) => (k === 'weiScale' ? 'wsc' : 'wzp'));
}

/**
 * K blocks of hoisted K-blocked weights operands that the host knows at creation to be multiples of
 * BK with K ranges starting at 0 (dense, grouped M: GemmTiledConfig.weiKBlocks): their hoist is
 * static (no per-element fallback in the kernel, which the compiler must otherwise keep beside the
 * hoisted path) and their reload a modulo by a constant.
 */
export type WeiKBlocks = Readonly<Partial<Record<'wsc' | 'wzp', number>>>;

/** Per-workgroup flags of the hoisted operands (`k0` and the fusion uniform in scope). */
export function hoistFlagsWgsl(f: GemmFusion, bk: number, kb?: WeiKBlocks): string {
  return hoistedWeightOperands(f).map((b) => {
    const op = fusionOperands(f).find((o) => o.name === b)!;
    return op.op.terms.dims[1] === '-' || kb?.[b] ? `let hoist_${b} = true;` : `let hoist_${b} = Q[${op.slot + 1}u].y % ${bk}u == 0u && k0 % ${bk}u == 0u;`;
  }).join(' ');
}

/** Declarations (zero) of lane `lane`'s hoisted values, set by hoistSetWgsl. */
export function hoistDeclWgsl(f: GemmFusion, lane: number | string): string {
  return hoistedWeightOperands(f).map((b) => `var h${b}${lane} = 0.0;`).join(' ');
}

/**
 * Assignment of lane `lane`'s hoisted value of operand `b` at the slice start `kb`, column `col` (0
 * beyond N), decided per workgroup: only where it changes, at the first slice (`k0`) and, K-blocked,
 * where a block starts (the registers keep it across the slices of a block).
 */
function hoistSetRuntimeWgsl(f: GemmFusion, b: 'wsc' | 'wzp', lane: number | string, col: string, kb: string): string {
  const o = named(f, b === 'wsc' ? 'weiScale' : 'weiZp')!;
  const op = fusionOperands(f).find((x) => x.name === b)!;
  const starts = op.op.terms.dims[1] === 'b' ? ` || ${kb} % Q[${op.slot + 1}u].y == 0u` : '';
  return `if (hoist_${b} && (${kb} == k0${starts})) { h${b}${lane} = 0.0; if (${col} < P.N) { h${b}${lane} = ${operandLoad(o, `g, bW, ${kb}, ${col}`, false)}; } }`;
}

/**
 * Assignments of the hoisted values of lanes `lanes` at the slice start `kb`. Static hoists
 * (staticHoist): per operand one condition (a block start: a modulo by the constant block; a
 * K-constant map: the first slice) and one index computation, without the map function's division by the runtime block. `chunk`: the lanes are the
 * consecutive columns col0 + i of one chunk, in or out of range as a whole (`guard`), so lane i reads
 * `index(col0) + i * column stride` where the map is unit along N. Operands not static: per lane,
 * decided per workgroup (hoistSetRuntimeWgsl).
 */
export function hoistSetWgsl(f: GemmFusion, lanes: readonly { lane: number | string; col: string }[], kb: string, kBlocks: WeiKBlocks | undefined,
  chunk?: { guard: string }): string {
  return hoistedWeightOperands(f).map((b) => {
    if (!staticHoist(f, b, kBlocks)) return lanes.map((l) => hoistSetRuntimeWgsl(f, b, l.lane, l.col, kb)).join(' ');
    const o = fusionOperands(f).find((x) => x.name === b)!;
    const { terms } = o.op, slot = o.slot;
    const block = kBlocks?.[b];
    const X = b.toUpperCase();
    const load = wgslType(o.op.dt).load;
    const ix = (col: string): string => {
      const t: string[] = [];
      if (terms.g) t.push(`g * Q[${slot}u].x`);
      const dim = (d: '-' | 'u' | 'b', i: string, lane: string, blk: string): void => {
        if (d === 'u') t.push(`(${i}) * Q[${slot}u].${lane}`);
        else if (d === 'b') t.push(`((${i}) / ${blk}) * Q[${slot}u].${lane}`);
      };
      dim(terms.dims[0], 'bW', 'y', `Q[${slot + 1}u].x`);
      dim(terms.dims[1], kb, 'z', block ? `${block}u` : `Q[${slot + 1}u].y`);
      dim(terms.dims[2], col, 'w', `Q[${slot + 1}u].z`);
      if (terms.off) t.push(`Q[${slot + 1}u].w`);
      return t.length ? t.join(' + ') : '0u';
    };
    const cond = block ? `${kb} % ${block}u == 0u` : `${kb} == k0`;
    const zeros = lanes.map((l) => `h${b}${l.lane} = 0.0;`).join(' ');
    if (chunk && terms.dims[2] !== 'b') {
      const step = terms.dims[2] === 'u' ? (i: number): string => (i === 0 ? '' : ` + ${i}u * Q[${slot}u].w`) : (): string => '';
      return `if (${cond}) { ${zeros} if (${chunk.guard}) { let si_${b} = ${ix(lanes[0].col)};${lanes.map((l, i) => ` h${b}${l.lane} = ${load(X, `si_${b}${step(i)}`)};`).join('')} } }`;
    }
    return `if (${cond}) { ${zeros}${lanes.map((l) => ` if (${l.col} < P.N) { h${b}${l.lane} = ${load(X, ix(l.col))}; }`).join('')} }`;
  }).join(' ');
}

/** Statements setting `v` to the staged weights element `idx` at (k, col), hoisted operands from lane `lane`. */
export function fusionLoadBHoisted(f: GemmFusion, c: GemmTiledConfig, idx: string, lane: number): string {
  return `v = ${wgslType(c.wei).load('B', idx)};${fusionDequantB(f, lane, 'g, bW, k, col', c.weiKBlocks)}`;
}

/**
 * Statements turning the weights code in `v` (f32, or i32 for an integer GEMM) into the staged value
 * at map coordinates `coords`: minus the zero point, times the scale; hoisted operands (hoistSetWgsl)
 * from lane `lane` where the slice allows (always where `kBlocks` or the map makes the hoist static).
 */
export function fusionDequantB(f: GemmFusion, lane: number | string, coords: string, kBlocks?: WeiKBlocks): string {
  const zp = named(f, 'weiZp'), sc = named(f, 'weiScale');
  if (f.intAcc) return zp ? ` v -= ${operandLoad(zp, coords, true)};` : '';
  const hoisted = hoistedWeightOperands(f);
  let s = '';
  const apply = (b: 'wsc' | 'wzp', o: { buf: string; op: FusedOperand } | undefined, op: string): void => {
    if (!o) return;
    if (hoisted.includes(b) && staticHoist(f, b, kBlocks)) s += ` v ${op}= h${b}${lane};`;
    else if (hoisted.includes(b)) s += ` if (hoist_${b}) { v ${op}= h${b}${lane}; } else { v ${op}= ${operandLoad(o, coords, false)}; }`;
    else s += ` v ${op}= ${operandLoad(o, coords, false)};`;
  };
  apply('wzp', zp, '-');
  apply('wsc', sc, '*');
  return s;
}

/** Whether hoisted operand `b` is held in registers in every slice, known when the kernel is generated. */
export function staticHoist(f: GemmFusion, b: 'wsc' | 'wzp', kBlocks?: WeiKBlocks): boolean {
  const op = fusionOperands(f).find((o) => o.name === b);
  return op !== undefined && (op.op.terms.dims[1] === '-' || kBlocks?.[b] !== undefined);
}

function stageLoad(f: GemmFusion, t: ReturnType<typeof wgslType>, idx: string, coords: string,
  zp: { buf: string; op: FusedOperand } | undefined, sc: { buf: string; op: FusedOperand } | undefined, what: string): string {
  const buf = what === 'src' ? 'A' : 'B';
  if (f.intAcc) {
    if (!t.loadInt) throw new Error(`gemm-fusion: an integer GEMM needs integer ${what}`);
    return `v = ${t.loadInt(buf, idx)}${zp ? ` - ${operandLoad(zp, coords, true)}` : ''};`;
  }
  let s = `v = ${t.load(buf, idx)};`;
  if (zp) s += ` v -= ${operandLoad(zp, coords, false)};`;
  if (sc) s += ` v *= ${operandLoad(sc, coords, false)};`;
  return s;
}

/**
 * The epilogue: per output (row, dst column n), the GEMM column value (integer GEMM: scaled) plus bias
 * for the gate / up columns, the GLU, the chain (eltwise, binary `ix_bin*`, sum), `/ s_dst + zp_dst`,
 * the store.
 */
export function fusionEpilogueWgsl(f: GemmFusion, c: GemmTiledConfig): string {
  const th = gemmThreads(c);
  const { rm, rn } = th;
  const jn = f.glu ? rn / 2 : rn;
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  // A gather's per-token src scale follows the token of the routed row (a padding row's sums are 0);
  // a scatter's `row` is the dst row, its src scale the routed row's (`rr`, epilogueRowWgsl).
  const srcRow = c.rows?.gather ? 'u32(max(TI[row], 0))' : c.rows?.scatter ? 'rr' : 'row';
  const ssc = named(f, 'srcScale'), wsc = named(f, 'weiScale');
  const colValue = (x: string, col: string): string => {
    let e = f.intAcc ? `f32(${x})${ssc ? ` * ${operandLoad(ssc, `gq, bS, ${srcRow}, 0u`, false)}` : ''}${wsc ? ` * ${operandLoad(wsc, `g, bW, 0u, ${col}`, false)}` : ''}` : x;
    if (Bi) e += ` + ${Bi.load('BIAS', biasIndexWgsl(c, `(${col})`))}`;
    return e;
  };
  return /* wgsl */ `
  for (var r = 0u; r < ${rm}u; r++) {
    ${epilogueRowWgsl(c)}
    for (var j = 0u; j < ${jn}u; j++) {
      let cn = n0 + ${colOfWgsl(th, 'j')};
      if (cn >= Q[0].x) { continue; }
      ${f.glu ? `let gc = glu_col(cn, 0u); let uc = glu_col(cn, 1u);
      var v = glu_act(${colValue('acc[r][j]', 'gc')}, ${colValue(`acc[r][j + ${jn}u]`, 'uc')});` : `var v = ${colValue('acc[r][j]', 'cn')};`}
      let di = ${dstIndexWgsl(c, 'cn')};
      ${fusionChainWgsl(f, c.dst)}
      ${wgslStore(c.dst, 'D', 'di', 'v')}
    }
  }`;
}

/**
 * The post-op chain (eltwise, binary `ix_bin*`, sum reading `D[di]`) then `/ s_dst + zp_dst`, as
 * statements on `v` at dst (row, cn) of group gq; shared by gemm-tiled and gemv-splitk.
 */
export function fusionChainWgsl(f: GemmFusion, dst: DataType): string {
  const dsc = named(f, 'dstScale'), dzp = named(f, 'dstZp');
  const chain = f.chain.map((s) => {
    if (s.kind === 'eltwise') return s.wgsl;
    if (s.kind === 'sum') return `v += ${s.scale === 1 ? '' : `${Math.fround(s.scale).toPrecision(9)}f * `}${wgslLoadRw(dst, 'D', 'di')};`;
    const b = wgslType(f.binary[s.index].dt).load(`BIN${s.index}`, `ix_bin${s.index}(gq, gq, row, cn)`);
    return s.alg === 'binary_mul' ? `v *= ${b};` : `v += ${b};`;
  });
  if (dsc) chain.push(`v /= ${operandLoad(dsc, 'gq, gq, row, cn', false)};`);
  if (dzp) chain.push(`v += ${operandLoad(dzp, 'gq, gq, row, cn', false)};`);
  return chain.join('\n      ');
}
