import type { DataType } from '../../common/data_type.js';
import { wgslHelpersFor, wgslStore, wgslType } from './wgsl_dtypes.js';
import { FUSION_BINDING, fusionOperands, gemmFusionKey, gluColumnWgsl, gluFnWgsl, mapFnWgsl, type GemmFusion } from './wgsl_quant.js';
import { inlineScheduleBindings, inlineScheduleKey, inlineScheduleWgsl, Y_FOLD, ZERO_TILE, type InlineScheduleConfig } from './grouped_schedule.js';
import { fusionChainWgsl } from './gemm_fusion.js';
import { TOKEN_INDEX_BINDING, TOKEN_KS_BINDING } from './gemm_rows.js';
import { WGSL_EXACT_HELPERS } from './wgsl_exact.js';
import { floatBitsLoad, QROWS_ERR_NONFINITE } from './quant_rows.js';

/**
 * `gemv-splitk`: the decode grouped GEMM (a few rows per expert), bound by streaming the touched
 * weights once. A tile of the device schedule (grouped_schedule.ts, TM = R rows) is split over many
 * workgroups: along N into column tiles of L lanes x C columns, and along K twice, into S slices
 * inside the workgroup and KG splits across workgroups. Each thread streams C consecutive weight
 * columns of its K slice with one vector load per k (vec4f for f32, two u32 for 16-bit, one u32
 * for 8-bit and 4-bit codes, decoded in registers), unrolled by U (`unroll`) so U loads are in flight, and
 * keeps R x C accumulators (rows past the tile's end read its last row and are never stored).
 *
 * Reduction in a fixed order, no atomics: the S slices of a workgroup are summed through workgroup
 * memory in slice order; with KG > 1 the workgroups write partial sums to a scratch buffer and a
 * second pass (`gemv-splitk-reduce`, same dispatch) adds them in split order and runs the epilogue.
 * A second run gives the same bits.
 *
 * Fusion (rfcs/0002, as gemm-tiled): weight scales and zero points through their index maps,
 * evaluated once per thread per K block (the map's K block, 1 for per-element K, the whole slice for
 * per-column ones), not per element; src scales / zero points per element as src is read. The
 * integer GEMM (W8A8, `intAcc`): i32 sums of codes minus zero points, its K-constant src and weights
 * scales applied per output in the epilogue (no packed dot4 yet: one i32 multiply-add per element).
 * Epilogue per dst column (`put`): bias, the GLU (its gate and up columns streamed by two lanes of the
 * workgroup, combined through workgroup memory or in the reduce pass: a fixed order), the post-op
 * chain (eltwise, binary, sum), dst scale / zero point, the store.
 *
 * MoE rows (gemm_rows.ts semantics, the schedule validates the maps): a gather reads src row
 * TI[routed row] (-1: zeros), a scatter writes dst row TI[r] * topK + KS[r] (-1: nothing), the expert
 * map is in the schedule's tile table, zero-filled ungrouped rows come as ZERO_TILE tiles.
 *
 * Params: GEMV_PARAMS_WORDS below. Dispatch (indirect, from the schedule): x = column tiles x KG,
 * y / z = schedule tiles.
 */
export interface GemvSplitKConfig {
  /** Rows per schedule tile (the schedule's TM). */
  readonly rows: number;
  readonly src: DataType;
  readonly wei: DataType;
  readonly dst: DataType;
  readonly bias: DataType | undefined;
  /** Vector loads of the weights (unit column stride, K stride and group stride multiples of C). */
  readonly vec: boolean;
  /** Splits of K across workgroups (1: one pass, epilogue in place). */
  readonly kSplit: number;
  /** WGSL statements applied to `v` (f32) after the bias, without a fusion (its chain replaces them). */
  readonly epilogue: string;
  /** rfcs/0002 scales, zero points, binary / sum post-ops and the GLU (gemvFusionSupported), undefined without. */
  readonly fusion: GemmFusion | undefined;
  /** MoE row modes (gemm_rows.ts): gathered src rows, scattered dst rows, zero-filled ungrouped rows. */
  readonly moe: GemvRows;
  /**
   * The schedule inside the kernel (grouped_schedule.ts inlineScheduleWgsl: every workgroup validates
   * the runtime data and finds its tile), undefined: the grouped-schedule dispatch's tile table.
   */
  readonly inline?: InlineScheduleConfig | undefined;
  /**
   * One dense GEMM, no groups and no schedule (a dense matmul of few rows, one expert of a Proposal #3
   * grouped_gemm): tile t is rows [t R, min((t + 1) R, P.M)) of group 0, P.M being the rows (for
   * grouped_gemm written on the device by its expert-dims pass). Tiles at or past P.M return at once.
   */
  readonly dense?: boolean | undefined;
  /** Lanes (column groups) per workgroup, S = 256 / lanes K slices; undefined: gemvGeometry's default for the type. */
  readonly lanes?: number | undefined;
  /** Weight loads in flight per thread in the K loop (4, 8 or 16; undefined: 4). */
  readonly unroll?: number | undefined;
  /**
   * Weight scales applied per K block to the block's partial sums rather than to every weight (one
   * multiply per block instead of per element); only where the scale has K blocks (not per k).
   */
  readonly blockScale?: boolean | undefined;
  /**
   * Dynamic int8 activations quantized in the kernel (dense GEMM of s8 src with per-row scales, one K pass): src
   * (binding 1) holds the caller's float rows of this type, P.lda (word 18) apart; each workgroup takes the
   * absmax of each of its rows over the whole K, s = RNE(amax / 127) and the codes RNE(x / s) with the
   * quant-rows-s8 kernel's integer functions (wgsl_exact.ts), so codes, scales and sums are those of a
   * quantization pass followed by this kernel on its s8 rows, bit for bit. A row holding a NaN or an
   * infinity is reported in the status slot (GEMV_STATUS_BINDING): code QROWS_ERR_NONFINITE, word 1 the
   * atomicMax of ~(expert << 16 | row), the expert being word 19: the lowest expert, then its lowest row.
   */
  readonly quantSrc?: 'f32' | 'bf16' | 'f16' | undefined;
  /**
   * quantSrc only: u32 words per row (ceil(K / 4), 4 codes each) of the workgroup's codes, quantized once by the
   * whole workgroup after the scales and read by the K loop (gemvQuantStageWords: where R rows of them fit the
   * workgroup memory); undefined: every lane requantizes each code it reads (the same codes, ~50 integer ops each).
   */
  readonly quantStage?: number | undefined;
}

export interface GemvRows {
  readonly gather: boolean;
  readonly scatter: boolean;
  readonly zeroFill: boolean;
}

export const GEMV_NO_ROWS: GemvRows = { gather: false, scatter: false, zeroFill: false };

/** Binding of the partial sums (KG > 1). */
export const GEMV_PARTIALS_BINDING = 20;
/** Binding of the status slot of a kernel quantizing its src (quantSrc). */
export const GEMV_STATUS_BINDING = 21;

/**
 * Columns per thread and lanes per workgroup for a weights type (256 threads = L lanes x S slices);
 * `lanes` overrides the type's default L (a power of two from 4 to 64).
 */
export function gemvGeometry(wei: DataType, lanes?: number): { C: number; L: number; S: number } {
  const C = wei === 's4' || wei === 'u4' || wei === 'f4_e2m1' ? 8 : 4;
  const L = lanes ?? (wei === 'f32' ? 16 : 32);
  return { C, L, S: 256 / L };
}

/** K iterations per thread the split aims at: enough loads in flight per thread, short dependency chains. */
export function gemvKPerThread(wei: DataType): number {
  const bits = wei === 'f32' ? 32 : wei === 'f16' || wei === 'bf16' ? 16 : gemvGeometry(wei).C === 8 ? 4 : 8;
  return bits >= 16 ? 128 : bits === 8 ? 64 : 32;
}

/**
 * The fusions the kernel handles: everything of gemm-tiled (scales and zero points of src and weights,
 * the GLU, the chain of eltwise / binary / sum, dst scale and zero point), the integer GEMM too (W8A8:
 * i32 accumulation of codes minus zero points, the K-constant scales applied per output).
 */
export function gemvFusionSupported(f: GemmFusion): boolean {
  // The integer GEMM subtracts zero points as i32 (as gemm-tiled stages them): integer zero points only.
  return !f.intAcc || [f.srcZp, f.weiZp].every((o) => !o || wgslType(o.dt).loadInt !== undefined);
}

/** A workgroup variable's bytes as WebGPU counts them against maxComputeWorkgroupStorageSize: rounded up to 16. */
const wgBytes = (n: number): number => Math.ceil(n / 16) * 16;

/** Workgroup memory of the main pass (`red`, the GLU's `tot`, quantSrc's `qmax` and staged codes), in bytes. */
export function gemvWorkgroupBytes(c: GemvSplitKConfig): number {
  const { C, L } = gemvGeometry(c.wei, c.lanes);
  const tot = c.fusion?.glu && c.kSplit === 1 ? wgBytes(L * C * 4) : 0;
  const quant = c.quantSrc ? wgBytes(c.rows * 4) + (c.quantStage ? wgBytes(c.rows * c.quantStage * 4) : 0) : 0;
  return 256 * (C / 4) * 16 + tot + quant;
}

/**
 * The words per row of a quantSrc kernel's staged codes for K (GemvSplitKConfig.quantStage): ceil(K / 4) where
 * the R rows of them fit `limit` bytes of workgroup memory beside the kernel's other variables, else undefined
 * (the lanes requantize).
 */
export function gemvQuantStageWords(c: GemvSplitKConfig, K: number, limit: number): number | undefined {
  const words = Math.max(1, Math.ceil(K / 4));
  return gemvWorkgroupBytes({ ...c, quantStage: words }) <= limit ? words : undefined;
}

export function gemvSplitKKey(c: GemvSplitKConfig, pass: 'main' | 'reduce'): string {
  const f = c.fusion;
  const r = `${c.moe.gather ? 'G' : ''}${c.moe.scatter ? 'S' : ''}${c.moe.zeroFill ? 'Z' : ''}`;
  return `gemv-splitk-${pass}:r${c.rows}:L${gemvGeometry(c.wei, c.lanes).L}u${c.unroll ?? 4}${hoistsScale(c) ? 'h' : ''}:${c.src}.${c.wei}.${c.dst}.${c.bias ?? 'nobias'}:${c.vec ? 'vec' : 'scalar'}:kg${c.kSplit > 1 ? 'n' : '1'}:rows${r}:${c.dense ? 'dense' : c.inline ? inlineScheduleKey(c.inline) : 'sched'}${c.quantSrc ? `:q${c.quantSrc}${c.quantStage ? `w${c.quantStage}` : ''}` : ''}:${f ? gemmFusionKey(f) : c.epilogue}`;
}

/**
 * Params (uniform, 28 x u32): the 16 words of gemm-tiled (gemm_tiled.ts) with _p0 = column tiles, _p1 =
 * KG, _p2 = K per split (of the KG x S splits), then topK (scatter), DN (dst columns: N / 2 with a GLU);
 * then what the in-kernel schedule reads (GEMV_SCHED_WORD..): G, total (row capacity), hasOther,
 * hasSizes, zeroFill, experts (expert map bound), tokens (token id bound), _.
 */
export const GEMV_PARAMS_WORDS = 28;
export const GEMV_SCHED_WORD = 20;

const HEADER = /* wgsl */ `
struct Params { M: u32, K: u32, N: u32, lda: u32, ldwk: u32, ldwn: u32, wg: u32, ldd: u32, sb: u32, db: u32, bg: u32, bn: u32, tilesN: u32, colTiles: u32, kSplit: u32, kChunk: u32, topK: u32, DN: u32, _p0: u32, _p1: u32,
  G: u32, total: u32, hasOther: u32, hasSizes: u32, zeroFill: u32, experts: u32, tokens: u32, _p2: u32 }
@group(0) @binding(0) var<uniform> P: Params;`;

/**
 * The schedule tile of this workgroup: g (the expert), gq (the group: per-group src / dst values and
 * binary src1), m0, m1 (early return past the last tile: uniform), from the schedule's table or
 * (inline) found by the workgroup itself, which the main pass's workgroup (0, 0, 0) reports
 * violations for.
 */
function tileWgsl(c: GemvSplitKConfig, pass: 'main' | 'reduce'): string {
  const pick = c.dense
    ? `let g = 0u; let gq = 0u;
  let m0 = t * ${c.rows}u;
  if (m0 >= P.M) { return; }
  let m1 = min(m0 + ${c.rows}u, P.M);`
    : c.inline
    ? `let tile = sched_tile(li, t, ${pass === 'main' ? 'wid.x == 0u && t == 0u' : 'false'});
  if (tile.x == 0u) { return; }
  let g = tile.y; let gq = tile.x - 1u;
  let m0 = tile.z;
  let m1 = tile.w;`
    : `if (t >= S[3]) { return; }
  let g = S[4u + 4u * t];
  let m0 = S[5u + 4u * t];
  let m1 = S[6u + 4u * t];
  let gq = S[7u + 4u * t];`;
  return `
  let t = wid.y + wid.z * ${Y_FOLD}u;
  ${pick}
  let ct = wid.x % P.colTiles;
  let kg = wid.x / P.colTiles;`;
}

/**
 * Fusion operands read in the K loop: src / weights zero points, and their scales but in the integer
 * GEMM (applied per output there); the others (binary, dst) in the epilogue.
 */
const inKLoop = (c: GemvSplitKConfig, name: string): boolean => name === 'szp' || name === 'wzp' || (!c.fusion?.intAcc && (name === 'ssc' || name === 'wsc'));
/** The src scale the kernel computes itself (quantSrc) is bound nowhere. */
const computedHere = (c: GemvSplitKConfig, name: string): boolean => c.quantSrc !== undefined && name === 'ssc';
/** An integer GEMM's per-output src scale is at the src row of a gathered routed row. */
const putReadsTokens = (c: GemvSplitKConfig): boolean => c.moe.scatter || (c.moe.gather && c.fusion?.intAcc === true && c.fusion.srcScale !== undefined);

/** Whether a pass runs the epilogue (`put`): the reduce pass, or the main pass without a K split. */
const putIn = (c: GemvSplitKConfig, pass: 'main' | 'reduce'): boolean => pass === 'reduce' || c.kSplit === 1;

/** The fusion operands a pass reads. */
function passOperands(c: GemvSplitKConfig, pass: 'main' | 'reduce'): ReturnType<typeof fusionOperands> {
  if (!c.fusion) return [];
  const put = putIn(c, pass);
  const loop = pass === 'main';
  return fusionOperands(c.fusion).filter((o) => !computedHere(c, o.name) && (inKLoop(c, o.name) ? loop : put));
}

/**
 * The bindings a pass declares and uses (each pipeline's auto layout holds exactly these; the
 * executor binds exactly these): 0 params, 1 src, 2 weights, 3 dst, 4 schedule, 5 bias, the fusion
 * uniform and operands (FUSION_BINDING ..), the partial sums, the token index / slots.
 */
export function gemvBindings(c: GemvSplitKConfig, pass: 'main' | 'reduce'): number[] {
  const put = putIn(c, pass);
  const out = [0];
  if (c.inline) out.push(...inlineScheduleBindings(c.inline, pass === 'main'));
  else if (!c.dense) out.push(4);
  if (pass === 'main') out.push(1, 2);
  if (pass === 'main' && c.quantSrc) out.push(GEMV_STATUS_BINDING);
  if (put) out.push(3);
  if (c.kSplit > 1) out.push(GEMV_PARTIALS_BINDING);
  if (put && c.bias) out.push(5);
  const ops = passOperands(c, pass);
  if (ops.length) out.push(FUSION_BINDING, ...ops.map((o) => o.binding));
  // The in-kernel schedule checks the row maps in every pass.
  const rows = c.inline?.rows ?? 'none';
  if ((pass === 'main' && c.moe.gather) || (put && putReadsTokens(c)) || rows !== 'none') out.push(TOKEN_INDEX_BINDING);
  if ((put && c.moe.scatter) || rows === 'scatter') out.push(TOKEN_KS_BINDING);
  return out.sort((x, y) => x - y);
}

/** Declarations of a pass's bindings, and phony reads keeping each one in the auto layout. */
function bindingsWgsl(c: GemvSplitKConfig, pass: 'main' | 'reduce'): { decl: string; uses: string } {
  const used = new Set(gemvBindings(c, pass));
  const D = wgslType(c.dst);
  const decl: string[] = [HEADER];
  const uses: string[] = [];
  if (used.has(1)) decl.push(`@group(0) @binding(1) var<storage, read> A: array<${c.quantSrc ? 'u32' : wgslType(c.src).array}>;`);
  if (used.has(GEMV_STATUS_BINDING)) decl.push(`@group(0) @binding(${GEMV_STATUS_BINDING}) var<storage, read_write> QST: array<atomic<u32>>;`, quantSrcWgsl(c.quantSrc!, c.rows, c.quantStage));
  if (used.has(2)) decl.push(`@group(0) @binding(2) var<storage, read> B: array<${weightsArray(c)}>;`);
  if (used.has(3)) decl.push(`@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;`);
  if (used.has(4)) decl.push('@group(0) @binding(4) var<storage, read> S: array<u32>;');
  if (used.has(5)) { decl.push(`@group(0) @binding(5) var<storage, read> BIAS: array<${wgslType(c.bias!).array}>;`); uses.push('_ = BIAS[0];'); }
  if (used.has(GEMV_PARTIALS_BINDING)) decl.push(`@group(0) @binding(${GEMV_PARTIALS_BINDING}) var<storage, read_write> PART: array<${accOf(c).s}>;`);
  const ops = passOperands(c, pass);
  if (ops.length) {
    decl.push(`@group(0) @binding(${FUSION_BINDING}) var<uniform> Q: array<vec4u, ${1 + 2 * fusionOperands(c.fusion!).length}>;`);
    uses.push('_ = Q[0].x;');
    for (const o of ops) {
      decl.push(`@group(0) @binding(${o.binding}) var<storage, read> ${o.name.toUpperCase()}: array<${wgslType(o.op.dt).array}>;`);
      decl.push(mapFnWgsl(o.name, o.op.terms, o.slot));
      uses.push(`_ = ${o.name.toUpperCase()}[0];`);
    }
  }
  if (used.has(TOKEN_INDEX_BINDING)) { decl.push(`@group(0) @binding(${TOKEN_INDEX_BINDING}) var<storage, read> TI: array<i32>;`); uses.push('_ = TI[0];'); }
  if (used.has(TOKEN_KS_BINDING)) { decl.push(`@group(0) @binding(${TOKEN_KS_BINDING}) var<storage, read> KS: array<i32>;`); uses.push('_ = KS[0];'); }
  if (c.inline) decl.push(inlineScheduleWgsl(c.inline, pass === 'main'));
  if (c.fusion?.glu) decl.push(gluColumnWgsl(c.fusion.glu.layout));
  if (c.fusion?.glu && putIn(c, pass)) decl.push(gluFnWgsl(c.fusion.glu));
  return { decl: decl.join('\n'), uses: uses.join(' ') };
}

/** The types whose WGSL helpers a pass may call. */
function helperTypes(c: GemvSplitKConfig): (DataType | undefined)[] {
  return [c.src, c.wei, c.dst, c.bias, ...(c.fusion ? fusionOperands(c.fusion).map((o) => o.op.dt) : [])];
}

/**
 * `fn put(g, gq, rr, cn, a0[, a1])`: the epilogue of routed row rr, dst column cn from its GEMM column
 * value(s) (a GLU: gate a0 and up a1): the scatter's dst row (-1: nothing written), bias, GLU, the
 * chain, the store (columns past the dst's skipped).
 */
function putFn(c: GemvSplitKConfig): string {
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  const f = c.fusion;
  // The integer GEMM's sums times the src scale (of the row read) and the weights' (of the column).
  const srcRow = c.moe.gather ? 'u32(max(TI[rr], 0))' : 'rr';
  const col = (x: string, cc: string): string => (f?.intAcc
    ? `f32(${x})${f.srcScale ? ` * ${c.quantSrc ? 'bitcast<f32>(qsc[rr - qm0])' : wgslType(f.srcScale.dt).load('SSC', `ix_ssc(gq, gq, ${srcRow}, 0u)`)}` : ''}${f.weiScale ? ` * ${wgslType(f.weiScale.dt).load('WSC', `ix_wsc(g, g, 0u, ${cc})`)}` : ''}`
    : x) + (Bi ? ` + ${Bi.load('BIAS', `g * P.bg + (${cc}) * P.bn`)}` : '');
  const value = f?.glu
    ? `let gc = glu_col(cn, 0u); let uc = glu_col(cn, 1u);
  var v = glu_act(${col('a0', 'gc')}, ${col('a1', 'uc')});`
    : `var v = ${col('a0', 'cn')};`;
  const T = accOf(c).s;
  return `fn put(g: u32, gq: u32, rr: u32, cn: u32, a0: ${T}${f?.glu ? `, a1: ${T}` : ''}) {
  if (cn >= P.DN) { return; }
  ${c.moe.scatter ? 'if (TI[rr] < 0) { return; }\n  let row = u32(TI[rr]) * P.topK + u32(KS[rr]);' : 'let row = rr;'}
  ${value}
  let di = row * P.ldd + cn;
  ${f ? fusionChainWgsl(f, c.dst) : c.epilogue}
  ${wgslStore(c.dst, 'D', 'di', 'v')}
}`;
}

/**
 * Declarations of a kernel quantizing its src (quantSrc): the exact helpers, the row absmax and scales, the src
 * load; with a stage (W words per row), the workgroup's codes, 4 a word (code of k in byte k % 4 of word k / 4),
 * and `qcode(word, k)`, the code of k sign-extended from its byte.
 */
function quantSrcWgsl(src: 'f32' | 'bf16' | 'f16', R: number, W: number | undefined): string {
  return `${WGSL_EXACT_HELPERS}
var<workgroup> qmax: array<atomic<u32>, ${R}>;
var<private> qsc: array<u32, ${R}>;
var<private> qm0: u32;
fn qbits(i: u32) -> u32 { return ${floatBitsLoad(src, 'A')}; }${W ? `
var<workgroup> qcodes: array<u32, ${R * W}>;
fn qcode(w: u32, k: u32) -> i32 { return extractBits(bitcast<i32>(qcodes[w]), (k & 3u) * 8u, 8u); }` : ''}`;
}

/**
 * The quantization prologue (quantSrc): each real row's absmax over the whole K (quant-rows-s8's: the
 * largest |x| bits, order-free), its scale qs<r> (1 for a zero row), a non-finite row reported by one
 * invocation of the workgroup of column tile 0. Padding rows (past m1) keep scale 1: never stored.
 * With a stage of W words per row, the workgroup then quantizes each real row's codes once into it (the
 * codes the lanes would compute, ex_quant_s8); padding rows keep the zero-initialized words.
 */
function quantPrologue(R: number, W: number | undefined): string {
  const rows = Array.from({ length: R }, (_, r) => r);
  return `
  qm0 = m0;
  {
    ${rows.map((r) => `var mx${r} = 0u;`).join(' ')}
    for (var kk = li; kk < P.K; kk += 256u) {
      ${rows.map((r) => `if (m0 + ${r}u < m1) { mx${r} = max(mx${r}, qbits(ar${r} + kk) & 0x7fffffffu); }`).join('\n      ')}
    }
    ${rows.map((r) => `if (mx${r} != 0u) { atomicMax(&qmax[${r}], mx${r}); }`).join('\n    ')}
  }
  workgroupBarrier();
  ${rows.map((r) => `let qa${r} = atomicLoad(&qmax[${r}]);
  let qs${r} = select(0x3f800000u, ex_div127(qa${r}), qa${r} != 0u && qa${r} < 0x7f800000u);
  qsc[${r}] = qs${r};
  if (qa${r} >= 0x7f800000u && wid.x == 0u && li == 0u) { atomicStore(&QST[0], ${QROWS_ERR_NONFINITE}u); atomicMax(&QST[1], ~((P._p1 << 16u) | (m0 + ${r}u))); }`).join('\n  ')}${W ? `
  ${rows.map((r) => `if (m0 + ${r}u < m1) {
    for (var qw = li; qw < min(${W}u, (P.K + 3u) / 4u); qw += 256u) {
      var word = 0u;
      for (var j = 0u; j < 4u; j++) {
        let k = 4u * qw + j;
        if (k < P.K) { word |= (bitcast<u32>(ex_quant_s8(qbits(ar${r} + k), qs${r})) & 0xffu) << (8u * j); }
      }
      qcodes[${r * W}u + qw] = word;
    }
  }`).join('\n  ')}
  workgroupBarrier();` : ''}`;
}

/** Zeros in the dst columns of this column tile for a ZERO_TILE tile (rows in no group). */
function zeroTileWgsl(c: GemvSplitKConfig, TD: number): string {
  return `if (g == ${ZERO_TILE}u) {
    for (var i = li; i < ${c.rows * TD}u; i += 256u) {
      let row = m0 + i / ${TD}u;
      let cn = ct * ${TD}u + i % ${TD}u;
      if (row < m1 && cn < P.DN) { ${wgslStore(c.dst, 'D', 'row * P.ldd + cn', '0.0')} }
    }
    return;
  }`;
}

/**
 * u4 codes masked in place, not shifted down: lane j of a word's half holds code x 16^j (exact in f32), and
 * the weight scales of that lane come divided by 16^j (exact: scales above ~3e-30), so every product
 * code x scale, and so every sum, is the shifted form's, bit for bit. Eight shifts fewer per u32: u4 T = 4 / 8
 * 65.4 -> 60.3 / 102.4 -> 97.1 us on an H100 (reports/gpu-u4-masked-h100-s13.md). Needs weight scales applied per
 * weight (not per block: hoisted sums would carry the powers) and no zero points. Going further, codes put into
 * the mantissa of 2^23 with no conversion at all, measured no faster (reports/gpu-magic-codes-h100-s14.md).
 */
export function maskedU4(c: GemvSplitKConfig): boolean {
  const f = c.fusion;
  return c.wei === 'u4' && c.vec && f !== undefined && !f.intAcc && f.weiScale !== undefined && f.weiZp === undefined && !hoistsScale(c);
}

/** 16^-j for lanes j = 4h .. 4h + 3 of a masked u4 word (maskedU4). */
const MASKED_U4_POWERS = ['vec4f(1.0, 0.0625, 0.00390625, 0.000244140625)', 'vec4f(1.52587890625e-5, 9.5367431640625e-7, 5.9604644775390625e-8, 3.725290298461914e-9)'];

function weightsArray(c: GemvSplitKConfig): string {
  if (!c.vec) return wgslType(c.wei).array;
  if (c.wei === 'f32') return 'vec4f';
  if (c.wei === 'f16' || c.wei === 'bf16') return 'vec2u';
  return 'u32';
}

/** The accumulation types: vec4f / f32, or vec4i / i32 for the integer GEMM. */
function accOf(c: GemvSplitKConfig): { v: string; s: string; zero: string } {
  return c.fusion?.intAcc ? { v: 'vec4i', s: 'i32', zero: '0i' } : { v: 'vec4f', s: 'f32', zero: '0.0' };
}

/** WGSL setting `w0` (and `w1` when C = 8), vec4f (integer GEMM: vec4i codes), to the raw decoded weights at (k, col0..col0+C-1). */
function weightLoad(c: GemvSplitKConfig, C: number, k: string, sfx: string): string {
  const e = `wBase + (${k}) * P.ldwk + col0`;
  const int = c.fusion?.intAcc === true;
  if (!c.vec) {
    const T = wgslType(c.wei);
    const el = (j: number): string => (int ? T.loadInt! : T.load)('B', `wBase + (${k}) * P.ldwk + min(col0 + ${j}u, P.N - 1u) * P.ldwn`);
    const v = (j0: number): string => `${accOf(c).v}(${[0, 1, 2, 3].map((j) => el(j0 + j)).join(', ')})`;
    return `let w0${sfx} = ${v(0)};${C === 8 ? ` let w1${sfx} = ${v(4)};` : ''}`;
  }
  if (int) {
    switch (c.wei) {
      case 's8': return `let q${sfx} = vec4i(bitcast<i32>(B[(${e}) / 4u])); let w0${sfx} = (q${sfx} << vec4u(24u, 16u, 8u, 0u)) >> vec4u(24u);`;
      case 'u8': return `let q${sfx} = vec4u(B[(${e}) / 4u]); let w0${sfx} = vec4i((q${sfx} >> vec4u(0u, 8u, 16u, 24u)) & vec4u(255u));`;
      case 's4': return `let q${sfx} = vec4i(bitcast<i32>(B[(${e}) / 8u])); let w0${sfx} = (q${sfx} << vec4u(28u, 24u, 20u, 16u)) >> vec4u(28u); let w1${sfx} = (q${sfx} << vec4u(12u, 8u, 4u, 0u)) >> vec4u(28u);`;
      case 'u4': return `let q${sfx} = vec4u(B[(${e}) / 8u]); let w0${sfx} = vec4i((q${sfx} >> vec4u(0u, 4u, 8u, 12u)) & vec4u(15u)); let w1${sfx} = vec4i((q${sfx} >> vec4u(16u, 20u, 24u, 28u)) & vec4u(15u));`;
      default: throw new Error(`gemv-splitk: no integer load for ${c.wei}`);
    }
  }
  switch (c.wei) {
    case 'f32': return `let w0${sfx} = B[(${e}) / 4u];`;
    case 'f16': return `let q${sfx} = B[(${e}) / 4u]; let w0${sfx} = vec4f(unpack2x16float(q${sfx}.x), unpack2x16float(q${sfx}.y));`;
    case 'bf16': return `let q${sfx} = B[(${e}) / 4u]; let w0${sfx} = bitcast<vec4f>(vec4u(q${sfx}.x << 16u, q${sfx}.x & 0xffff0000u, q${sfx}.y << 16u, q${sfx}.y & 0xffff0000u));`;
    case 's8': return `let q${sfx} = vec4i(bitcast<i32>(B[(${e}) / 4u])); let w0${sfx} = vec4f((q${sfx} << vec4u(24u, 16u, 8u, 0u)) >> vec4u(24u));`;
    case 'u8': return `let q${sfx} = vec4u(B[(${e}) / 4u]); let w0${sfx} = vec4f((q${sfx} >> vec4u(0u, 8u, 16u, 24u)) & vec4u(255u));`;
    case 's4': return `let q${sfx} = vec4i(bitcast<i32>(B[(${e}) / 8u])); let w0${sfx} = vec4f((q${sfx} << vec4u(28u, 24u, 20u, 16u)) >> vec4u(28u)); let w1${sfx} = vec4f((q${sfx} << vec4u(12u, 8u, 4u, 0u)) >> vec4u(28u));`;
    case 'u4': return maskedU4(c)
      ? `let q${sfx} = vec4u(B[(${e}) / 8u]); let w0${sfx} = vec4f(q${sfx} & vec4u(0xfu, 0xf0u, 0xf00u, 0xf000u)); let w1${sfx} = vec4f(q${sfx} & vec4u(0xf0000u, 0xf00000u, 0xf000000u, 0xf0000000u));`
      : `let q${sfx} = vec4u(B[(${e}) / 8u]); let w0${sfx} = vec4f((q${sfx} >> vec4u(0u, 4u, 8u, 12u)) & vec4u(15u)); let w1${sfx} = vec4f((q${sfx} >> vec4u(16u, 20u, 24u, 28u)) & vec4u(15u));`;
    case 'f8_e4m3': case 'f8_e5m2': {
      const d = c.wei === 'f8_e4m3' ? 'dec_e4m3' : 'dec_e5m2';
      return `let q${sfx} = B[(${e}) / 4u]; let w0${sfx} = vec4f(${[0, 1, 2, 3].map((j) => `${d}(byte_of(q${sfx}, ${j}u))`).join(', ')});`;
    }
    case 'f4_e2m1': {
      const v = (j0: number): string => `vec4f(${[0, 1, 2, 3].map((j) => `dec_e2m1(nib_of(q${sfx}, ${j0 + j}u))`).join(', ')})`;
      return `let q${sfx} = B[(${e}) / 8u]; let w0${sfx} = ${v(0)}; let w1${sfx} = ${v(4)};`;
    }
    default: throw new Error(`gemv-splitk: no vector load for ${c.wei}`);
  }
}

/** Upper end of the current scale block: min over the weight operands' K blocks (none: the slice end). */
function blockEnd(f: GemmFusion | undefined): string {
  const parts: string[] = [];
  for (const o of f ? fusionOperands(f) : []) {
    if (o.name !== 'wsc' && o.name !== 'wzp') continue;
    const d = o.op.terms.dims[1];
    if (d === 'u') parts.push('k + 1u');
    else if (d === 'b') parts.push(`(k / Q[${o.slot + 1}u].y + 1u) * Q[${o.slot + 1}u].y`);
  }
  return parts.reduce((acc, p) => `min(${acc}, ${p})`, 'ke');
}

/** The per-block scale / zero-point vectors (sc0, zp0, and sc1 / zp1 when C = 8) at (k, col0 + j). */
function blockQuant(c: GemvSplitKConfig, C: number): string {
  const f = c.fusion;
  if (!f) return '';
  const masked = maskedU4(c);
  let s = '';
  // The integer GEMM subtracts integer zero points in the loop; its (K-constant) scales wait for the epilogue.
  for (const [o, name] of [[f.intAcc ? undefined : f.weiScale, 'wsc'], [f.weiZp, 'wzp']] as const) {
    if (!o) continue;
    const T = wgslType(o.dt);
    const el = (j: number): string => (f.intAcc ? T.loadInt! : T.load)(name.toUpperCase(), `ix_${name}(g, g, k, min(col0 + ${j}u, P.N - 1u))`);
    for (let h = 0; h < C / 4; h++) s += `\n      let ${name}${h} = ${f.intAcc ? 'vec4i' : 'vec4f'}(${[0, 1, 2, 3].map((j) => el(4 * h + j)).join(', ')})${masked && name === 'wsc' ? ` * ${MASKED_U4_POWERS[h]}` : ''};`;
  }
  return s;
}

function dequant(c: GemvSplitKConfig, C: number, sfx: string): string {
  if (!dequantizes(c)) return '';
  const f = c.fusion!;
  const scale = f.weiScale && !f.intAcc && !hoistsScale(c);
  let s = '';
  for (let h = 0; h < C / 4; h++) {
    s += ` let d${h}${sfx} = ${f.weiZp ? `(w${h}${sfx} - wzp${h})` : `w${h}${sfx}`}${scale ? ` * wsc${h}` : ''};`;
  }
  return s;
}

/** Whether the loop transforms the raw weights (zero point, or a scale outside the integer GEMM not applied per block). */
function dequantizes(c: GemvSplitKConfig): boolean {
  const f = c.fusion;
  return f?.weiZp !== undefined || (f?.weiScale !== undefined && !f.intAcc && !hoistsScale(c));
}

/**
 * Whether the weights' scale multiplies each K block's partial sums (cfg.blockScale) instead of every
 * weight: a float GEMM whose weight scale has K blocks.
 */
export function hoistsScale(c: GemvSplitKConfig): boolean {
  const f = c.fusion;
  if (!c.blockScale || !f?.weiScale || f.intAcc) return false;
  // K blocks only: per-column scales (no K term) measured no faster hoisted on an H200
  // (reports/gemv5-h200.md), and a scale per k gains nothing.
  return fusionOperands(f).find((o) => o.name === 'wsc')?.op.terms.dims[1] === 'b';
}

/**
 * How a column tile maps onto GEMM columns. A tile holds TD dst columns; thread `lane` streams C
 * consecutive GEMM columns from `col0` (virtual columns lane * C .. + C - 1 of the tile's L * C).
 * Without a GLU they are the tile's columns in order. With one, the gate and up columns of the TD dst
 * columns: interleaved, they are the tile's 2 TD GEMM columns in order (virtual v: dst n0 + v / 2,
 * half v % 2); halves and blocks32, the first L / 2 lanes stream gate columns and the others the up
 * columns of the same dst columns (virtual v: half v / TD, dst n0 + v % TD), C consecutive dst columns
 * being C consecutive GEMM columns in both layouts.
 */
function columnMap(c: GemvSplitKConfig, L: number, C: number): { TD: number; wgsl: string; colOk: (j: number) => string; gate: string; up: string } {
  const glu = c.fusion?.glu;
  const TD = glu ? (L * C) / 2 : L * C;
  if (!glu || glu.layout === 'interleaved') {
    return {
      TD, wgsl: `let n0 = ct * ${TD}u;\n  let col0 = ct * ${L * C}u + lane * ${C}u;\n  let live = col0 < P.N;`,
      colOk: (j) => `col0 + ${j}u < P.N`, gate: '2u * li', up: '2u * li + 1u',
    };
  }
  return {
    TD, wgsl: `let n0 = ct * ${TD}u;\n  let d0 = n0 + (lane % ${L / 2}u) * ${C}u;\n  let col0 = glu_col(d0, lane / ${L / 2}u);\n  let live = d0 < P.DN;`,
    colOk: (j) => `d0 + ${j}u < P.DN`, gate: 'li', up: `${TD}u + li`,
  };
}

export function gemvSplitKWgsl(c: GemvSplitKConfig): string {
  if (c.quantSrc && (c.kSplit !== 1 || !c.dense || c.src !== 's8' || !c.fusion?.srcScale || c.fusion.srcZp)) throw new Error('gemv-splitk: quantSrc needs a dense GEMM of s8 src with per-row scales in one K pass');
  if (c.quantStage !== undefined && (!c.quantSrc || !Number.isInteger(c.quantStage) || c.quantStage < 1)) throw new Error(`gemv-splitk: quantStage ${c.quantStage} needs quantSrc and a whole number of words`);
  const { C, L, S: SL } = gemvGeometry(c.wei, c.lanes);
  const R = c.rows, CV = C / 4;
  const U = c.unroll ?? 4;
  const f = c.fusion;
  const glu = f?.glu !== undefined;
  const map = columnMap(c, L, C);
  const b = bindingsWgsl(c, 'main');
  const int = f?.intAcc === true;
  const acc = accOf(c);
  const hoist = hoistsScale(c);
  const wv = (h: number, sfx: string): string => (dequantizes(c) ? `d${h}${sfx}` : `w${h}${sfx}`);
  // The src element of row r at k, dequantized (src zero point, then scale) at the row it was read
  // from; the integer GEMM: the code minus the zero point.
  const srcAt = (r: number, k: string): string => {
    // quantSrc: the code; a float GEMM takes code x scale per element, as it does with a bound scale.
    if (c.quantSrc) {
      const code = c.quantStage ? `qcode(${r * c.quantStage}u + ((${k}) >> 2u), ${k})` : `ex_quant_s8(qbits(ar${r} + ${k}), qs${r})`;
      return int ? code : `(f32(${code}) * bitcast<f32>(qs${r}))`;
    }
    const ld = (t: DataType, buf: string, i: string): string => (int ? wgslType(t).loadInt! : wgslType(t).load)(buf, i);
    let e = ld(c.src, 'A', `ar${r} + ${k}`);
    if (f?.srcZp) e = `(${e} - ${ld(f.srcZp.dt, 'SZP', `ix_szp(gq, gq, sr${r}, ${k})`)})`;
    if (f?.srcScale && !int) e = `${e} * ${wgslType(f.srcScale.dt).load('SSC', `ix_ssc(gq, gq, sr${r}, ${k})`)}`;
    return e;
  };
  const mac = (a: string, w: string, cc: string): string => (int ? `${cc} += ${a} * ${w};` : `${cc} = fma(${a}, ${w}, ${cc});`);
  // With the scale per K block the loop sums into the block's accumulators (b), scaled into c after the block.
  const into = hoist ? 'b' : 'c';
  const fmas = (sfx: string, k: string): string => Array.from({ length: R }, (_, r) =>
    `{ let a = ${acc.v}(${srcAt(r, k)});${Array.from({ length: CV }, (_, h) => ` ${mac('a', wv(h, sfx), `${into}${r}_${h}`)}`).join('')} }`).join(' ');
  const step = `${weightLoad(c, C, 'k', '')}${dequant(c, C, '')}\n        ${fmas('', 'k')}`;
  const accs = (p: string): string => Array.from({ length: R }, (_, r) => Array.from({ length: CV }, (_, h) => `var ${p}${r}_${h} = ${acc.v}(${acc.zero});`).join(' ')).join('\n  ');
  const accDecl = accs('c');
  const blockDecl = hoist ? `\n      ${accs('b')}` : '';
  const blockApply = hoist ? `\n      ${Array.from({ length: R }, (_, r) => Array.from({ length: CV }, (_, h) => `c${r}_${h} = fma(b${r}_${h}, wsc${h}, c${r}_${h});`).join(' ')).join(' ')}` : '';
  // A gather reads src row TI[routed row] (-1: a padding row, its sums zeroed after the loop).
  const rowDecl = Array.from({ length: R }, (_, r) => (c.moe.gather
    ? `let t${r} = TI[min(m0 + ${r}u, m1 - 1u)]; let sr${r} = u32(max(t${r}, 0));`
    : `let sr${r} = min(m0 + ${r}u, m1 - 1u);`) + ` let ar${r} = sr${r} * ${c.quantSrc ? 'P._p0' : 'P.lda'};`).join('\n  ') + (c.quantSrc ? quantPrologue(R, c.quantStage) : '');
  const padZero = c.moe.gather ? Array.from({ length: R }, (_, r) => `if (t${r} < 0) { ${Array.from({ length: CV }, (_, h) => `c${r}_${h} = ${acc.v}(${acc.zero});`).join(' ')} }`).join('\n  ') : '';
  // Loads of n consecutive k first, then their FMAs: n loads in flight per thread; U at a time, then 4, then 1.
  const unrolled = (n: number): string => `${Array.from({ length: n }, (_, u) => weightLoad(c, C, `k + ${u}u`, `_${u}`) + dequant(c, C, `_${u}`)).join('\n        ')}
        ${Array.from({ length: n }, (_, u) => fmas(`_${u}`, `k + ${u}u`)).join('\n        ')}`;
  const loops = [...new Set([U, 4])].map((n) => `
      loop {
        if (k + ${n}u > kc) { break; }
        ${unrolled(n)}
        k += ${n}u;
      }`).join('');
  // Per row: the S slices summed in slice order through `red`; then K-split partial sums (by GEMM
  // column), the epilogue per GEMM column, or (GLU) the column totals through `tot` and the epilogue
  // per dst column from its gate and up totals.
  const sums = (r: number): string => `${Array.from({ length: CV }, (_, h) => `var t${h} = red[lane * ${CV}u + ${h}u];`).join(' ')}
    for (var i = 1u; i < ${SL}u; i++) { ${Array.from({ length: CV }, (_, h) => `t${h} += red[(i * ${L}u + lane) * ${CV}u + ${h}u];`).join(' ')} }
    ${Array.from({ length: C }, (_, j) => {
      const v = `t${j >> 2}[${j & 3}]`;
      if (c.kSplit > 1) return `if (m0 + ${r}u < m1 && ${map.colOk(j)}) { PART[(kg * P.M + m0 + ${r}u) * P.N + col0 + ${j}u] = ${v}; }`;
      if (glu) return `tot[lane * ${C}u + ${j}u] = ${v};`;
      return `if (m0 + ${r}u < m1) { put(g, gq, m0 + ${r}u, n0 + lane * ${C}u + ${j}u, ${v}); }`;
    }).join('\n    ')}`;
  let reduce = '';
  for (let r = 0; r < R; r++) {
    reduce += `
  ${Array.from({ length: CV }, (_, h) => `red[li * ${CV}u + ${h}u] = c${r}_${h};`).join(' ')}
  workgroupBarrier();
  if (s == 0u) {
    ${sums(r)}
  }
  workgroupBarrier();`;
    if (glu && c.kSplit === 1) {
      reduce += `
  if (li < ${map.TD}u && m0 + ${r}u < m1) { put(g, gq, m0 + ${r}u, n0 + li, tot[${map.gate}], tot[${map.up}]); }`;
    }
  }
  return /* wgsl */ `
${wgslHelpersFor(helperTypes(c))}
${b.decl}

var<workgroup> red: array<${acc.v}, ${256 * CV}>;
${glu && c.kSplit === 1 ? `var<workgroup> tot: array<${acc.s}, ${L * C}>;` : ''}

${putIn(c, 'main') ? putFn(c) : ''}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${tileWgsl(c, 'main')}
  ${b.uses}
  ${c.moe.zeroFill ? (c.kSplit === 1 ? zeroTileWgsl(c, map.TD) : `if (g == ${ZERO_TILE}u) { return; }`) : ''}
  let lane = li % ${L}u;
  let s = li / ${L}u;
  ${map.wgsl}
  let wBase = g * P.wg;
  ${rowDecl}
  ${accDecl}
  let split = kg * ${SL}u + s;
  let ks = min(P.K, split * P.kChunk);
  let ke = min(P.K, ks + P.kChunk);
  var k = ks;
  if (live) {
    loop {
      if (k >= ke) { break; }
      let kc = ${blockEnd(f)};${blockQuant(c, C)}${blockDecl}${loops}
      loop {
        if (k >= kc) { break; }
        ${step}
        k += 1u;
      }${blockApply}
    }
  }
  ${padZero}
  ${reduce}
}
`;
}

/** The second pass (KG > 1): partial sums added in split order, then the epilogue per dst column. */
export function gemvSplitKReduceWgsl(c: GemvSplitKConfig): string {
  const { C, L } = gemvGeometry(c.wei, c.lanes);
  const R = c.rows;
  const { TD } = columnMap(c, L, C);
  const b = bindingsWgsl(c, 'reduce');
  const glu = c.fusion?.glu !== undefined;
  const sum = (col: string, v: string): string => `var ${v} = ${accOf(c).zero};
      for (var j = 0u; j < P.kSplit; j++) { ${v} += PART[(j * P.M + rr) * P.N + ${col}]; }`;
  return /* wgsl */ `
${wgslHelpersFor(helperTypes(c))}
${b.decl}

${putFn(c)}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${tileWgsl(c, 'reduce')}
  if (kg != 0u) { return; }
  ${b.uses}
  ${c.moe.zeroFill ? zeroTileWgsl(c, TD) : ''}
  for (var i = li; i < ${R * TD}u; i += 256u) {
    let rr = m0 + i / ${TD}u;
    let cn = ct * ${TD}u + i % ${TD}u;
    if (rr < m1 && cn < P.DN) {
      ${glu ? `${sum('glu_col(cn, 0u)', 'a0')}\n      ${sum('glu_col(cn, 1u)', 'a1')}\n      put(g, gq, rr, cn, a0, a1);` : `${sum('cn', 'a0')}\n      put(g, gq, rr, cn, a0);`}
    }
  }
}
`;
}
