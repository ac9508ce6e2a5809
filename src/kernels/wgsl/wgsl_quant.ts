import type { DataType } from '../../common/data_type.js';
import type { IndexMap } from '../../attr/fusion.js';
import type { BinaryAlg, GluAlg, GluLayout } from '../../attr/eltwise.js';
import { f32Literal } from './wgsl_eltwise.js';

/**
 * rfcs/0002 index maps in a kernel. A map (attr/fusion.ts `IndexMap`) gives the element of a scales /
 * zero-point / binary values buffer for a logical coordinate: `g * gStride + sum_i strides[i] *
 * floor(idx[i] / blocks[i])`. Kernels see every coordinate as three dims (a 2D one padded on the left
 * with a zero stride) and read the strides and blocks from a uniform, so one pipeline serves every
 * shape with the same *structure* (which terms exist, which divide): that structure is the map's key.
 */
export interface MapTerms {
  readonly g: boolean;
  /** Per padded dim: absent (stride 0), unit (block 1) or blocked (a division). */
  readonly dims: readonly ('-' | 'u' | 'b')[];
  /** A per-launch element offset in the map's free word (`Q[slot + 1].w`): a dense matmul's batch launches (batch_dims.ts). */
  readonly off?: boolean;
}

/** The map's 8 uniform words: gStride, s0, s1, s2, b0, b1, b2, 0 (dims padded left to three). */
export function mapWords(m: IndexMap): number[] {
  const pad = 3 - m.strides.length;
  if (pad < 0) throw new Error(`mapWords: ${m.strides.length}-dim maps are not supported by the gpu kernels (at most 3)`);
  const s = [...new Array<number>(pad).fill(0), ...m.strides];
  const b = [...new Array<number>(pad).fill(1), ...m.blocks];
  return [m.gStride, s[0], s[1], s[2], b[0], b[1], b[2], 0];
}

export function mapTerms(m: IndexMap): MapTerms {
  const w = mapWords(m);
  return { g: w[0] !== 0, dims: [0, 1, 2].map((i) => (w[1 + i] === 0 ? '-' : w[4 + i] === 1 ? 'u' : 'b')) };
}

export function mapTermsKey(t: MapTerms): string {
  return `${t.g ? 'g' : ''}${t.dims.join('')}${t.off ? 'o' : ''}`;
}

/**
 * `fn ix_<name>(g, i0, i1, i2) -> u32` reading its strides from `Q[slot]` and blocks from `Q[slot + 1]`
 * (`Q` the fusion uniform, an `array<vec4u, n>`).
 */
export function mapFnWgsl(name: string, t: MapTerms, slot: number): string {
  const terms: string[] = [];
  if (t.g) terms.push(`g * Q[${slot}u].x`);
  const lane = ['y', 'z', 'w'], blk = ['x', 'y', 'z'];
  t.dims.forEach((d, i) => {
    if (d === 'u') terms.push(`i${i} * Q[${slot}u].${lane[i]}`);
    else if (d === 'b') terms.push(`(i${i} / Q[${slot + 1}u].${blk[i]}) * Q[${slot}u].${lane[i]}`);
  });
  if (t.off) terms.push(`Q[${slot + 1}u].w`);
  return `fn ix_${name}(g: u32, i0: u32, i1: u32, i2: u32) -> u32 { return ${terms.length ? terms.join(' + ') : '0u'}; }\n`;
}

/** One scales / zero-point / binary operand of a kernel: its values' data type and its map's structure. */
export interface FusedOperand {
  readonly dt: DataType;
  readonly terms: MapTerms;
}

/** A post-op of the epilogue chain after the GLU (rfcs/0002 (3)), in chain order. */
export type ChainStep =
  | { readonly kind: 'eltwise'; readonly wgsl: string }
  | { readonly kind: 'binary'; readonly alg: BinaryAlg; readonly index: number }
  | { readonly kind: 'sum'; readonly scale: number };

export interface GluConfig {
  readonly alg: GluAlg;
  readonly layout: GluLayout;
  readonly alpha: number;
  readonly limit: number;
}

/**
 * Quantization and fusion of one GEMM kernel (rfcs/0002), by structure only: values come from the
 * fusion uniform and the bound buffers at execution. Operands in binding order (gemm_tiled.ts).
 */
export interface GemmFusion {
  readonly srcScale?: FusedOperand;
  readonly srcZp?: FusedOperand;
  readonly weiScale?: FusedOperand;
  readonly weiZp?: FusedOperand;
  readonly dstScale?: FusedOperand;
  readonly dstZp?: FusedOperand;
  readonly binary: readonly FusedOperand[];
  readonly chain: readonly ChainStep[];
  readonly glu?: GluConfig;
  /**
   * Integer GEMM (s8/u8 src x s8/u8/s4/u4 weights): codes minus zero points staged as i32, exact i32
   * accumulation, scales (constant along K) applied once per output in the epilogue.
   */
  readonly intAcc: boolean;
}

/** Named operands in binding order: binding FUSION_BINDING + 1 + i. */
export const FUSION_BINDING = 6;
export const QUANT_SLOTS = ['srcScale', 'srcZp', 'weiScale', 'weiZp', 'dstScale', 'dstZp'] as const;
export type QuantSlot = (typeof QUANT_SLOTS)[number];
const SHORT: Record<QuantSlot, string> = { srcScale: 'ssc', srcZp: 'szp', weiScale: 'wsc', weiZp: 'wzp', dstScale: 'dsc', dstZp: 'dzp' };

/** The operands present, each with its WGSL name, binding and uniform slot (slot 0 is the header). */
export function fusionOperands(f: GemmFusion): { name: string; op: FusedOperand; binding: number; slot: number }[] {
  const out: { name: string; op: FusedOperand; binding: number; slot: number }[] = [];
  let slot = 1;
  QUANT_SLOTS.forEach((k, i) => {
    const op = f[k];
    if (op) { out.push({ name: SHORT[k], op, binding: FUSION_BINDING + 1 + i, slot }); slot += 2; }
  });
  f.binary.forEach((op, i) => { out.push({ name: `bin${i}`, op, binding: FUSION_BINDING + 1 + QUANT_SLOTS.length + i, slot }); slot += 2; });
  return out;
}

/** Storage buffers a fusion binds (for the device's maxStorageBuffersPerShaderStage). */
export function fusionStorageCount(f: GemmFusion): number {
  return fusionOperands(f).length;
}

export function gemmFusionKey(f: GemmFusion): string {
  const q = QUANT_SLOTS.map((k) => { const o = f[k]; return o ? `${SHORT[k]}=${o.dt}.${mapTermsKey(o.terms)}` : ''; }).filter((s) => s).join(',');
  const b = f.binary.map((o) => `${o.dt}.${mapTermsKey(o.terms)}`).join(',');
  const c = f.chain.map((s) => (s.kind === 'eltwise' ? s.wgsl : s.kind === 'binary' ? `${s.alg}#${s.index}` : `sum*${s.scale}`)).join(';');
  const g = f.glu ? `${f.glu.alg}.${f.glu.layout}.${f.glu.alpha}.${f.glu.limit}` : '';
  return `q[${q}]b[${b}]c[${c}]glu[${g}]${f.intAcc ? 'i32' : 'f32'}`;
}

/** GEMM column of dst column `c` (u32 WGSL expression), gate (`half` 0) or up (1), per GLU layout. */
export function gluColumnWgsl(layout: GluLayout): string {
  switch (layout) {
    case 'halves': return 'fn glu_col(c: u32, half: u32) -> u32 { return c + half * (P.N / 2u); }';
    case 'interleaved': return 'fn glu_col(c: u32, half: u32) -> u32 { return 2u * c + half; }';
    case 'blocks32': return 'fn glu_col(c: u32, half: u32) -> u32 { return 64u * (c / 32u) + (c % 32u) + 32u * half; }';
  }
}

/**
 * erfc with a small *relative* error everywhere (Numerical Recipes' erfcc, < 1.2e-7): gelu_erf(x) =
 * 0.5 x erfc(-x / sqrt 2) keeps its relative accuracy for negative x, where 1 + erf(x) from an
 * absolute-error erf loses it (and the GLU multiplies by up).
 */
const GLU_ERFC = /* wgsl */ `
fn glu_erfc(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(2.0 - r, r, x >= 0.0);
}
`;

/**
 * `act(gate) * up` (attr/eltwise.ts gluScalar) as a WGSL function; needs WGSL_ELTWISE_HELPERS. NaN as
 * the f32 formula gives it, from integer tests on the bits (WGSL's min / clamp return the bound for a
 * NaN, and the GPU gave swiglu of an infinite gate an infinity): a NaN gate or up, and a swish of an
 * infinite gate whose alpha * gate is not +Inf (gate * sigmoid(-Inf) = Inf * 0; alpha 0: sigmoid(NaN)).
 */
export function gluFnWgsl(g: GluConfig): string {
  const a = f32Literal(g.alpha), l = f32Literal(g.limit);
  const body =
    g.alg === 'glu_swiglu' ? `return gate * gd_logistic(${a} * gate) * up;` :
    g.alg === 'glu_geglu_erf' ? 'return 0.5 * gate * glu_erfc(gate * -0.70710678118f) * up;' :
    g.alg === 'glu_geglu_tanh' ? 'return 0.5 * gate * (1.0 + gd_tanh(0.79788456080f * (gate + 0.044715 * gate * gate * gate))) * up;' :
    `let gg = min(gate, ${l}); let uu = clamp(up, -${l}, ${l}); return gg * gd_logistic(${a} * gg) * (uu + 1.0);`;
  // The infinite gates at which alpha * gate is not +Inf (swiglu_oai swishes min(gate, limit): only -Inf).
  const NEG_INF = ' || bitcast<u32>(gate) == 0xff800000u', POS_INF = ' || bitcast<u32>(gate) == 0x7f800000u';
  const nanGate = g.alg === 'glu_swiglu' ? (g.alpha > 0 ? NEG_INF : g.alpha < 0 ? POS_INF : ' || !gd_finite(gate)')
    : g.alg === 'glu_swiglu_oai' && g.alpha >= 0 ? NEG_INF : '';
  return `${g.alg === 'glu_geglu_erf' ? GLU_ERFC : ''}fn glu_formula(gate: f32, up: f32) -> f32 { ${body} }
fn glu_act(gate: f32, up: f32) -> f32 { return select(glu_formula(gate, up), gd_nan(gate), gd_isnan(gate) || gd_isnan(up)${nanGate}); }\n`;
}
