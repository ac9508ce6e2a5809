/**
 * The fused kernel paths' side of a job (wasm/src/job.h, rfcs/0002): which compute path a problem
 * takes, why the kernels cannot run it (precise rejections), and the job fields for scales, zero
 * points, GLU and the post-op chain. Shared by the matmul (P#1, P#2, dense, variable K) and the
 * grouped_gemm (P#3) executors.
 *
 * Paths: `f32` (the original kernel: f32/bf16/f16, bias, eltwise relu/linear/clip/abs/square and a
 * leading sum in registers), `f32_fused` (any data type decoded in packing, then the generic tile
 * epilogue), `int` (s8/u8 src x s8/u8/s4/u4 weights, int16 x int16 -> exact int32).
 */
import type { DataType } from '../common/data_type.js';
import type { PrimitiveAttr } from '../attr/primitive_attr.js';
import type { MemoryDesc } from '../memory/desc.js';
import type { Memory } from '../memory/memory.js';
import {
  ELT_CODE_ALL, GLU_CODE, GLU_LAYOUT_CODE, JOB, JOB_DT_ALL, MAX_PO, PATH, PO, PO_KIND, Q, QARG,
} from './job_layout.js';
import { epilogueRejection } from './epilogue.js';
import { FLOAT_TYPES, type Fusion, type IndexMap, type QuantArg, type QuantParam } from '../attr/fusion.js';
import type { PanelQuant, PanelQuantSpec } from '../memory/packed_weights.js';

/** Role of each logical dimension of an argument's tensor in the job: group, row, k, n. */
export type Role = 'g' | 'r' | 'k' | 'n';

export interface Roles {
  readonly src: readonly Role[];
  readonly weights: readonly Role[];
  readonly dst: readonly Role[];
  /** Dimensions whose index is always 0 in the reference (broadcast batch dims of a dense src/weights). */
  readonly zeroG: Readonly<Partial<Record<QuantArg, boolean>>>;
}

/** One scale / zero-point / binary location, without its pointer. */
interface Loc {
  readonly st_g: number;
  readonly st_r: number;
  readonly st_k: number;
  readonly st_n: number;
  readonly blk_k: number;
  readonly blk_n: number;
}

export interface FusedPlan {
  readonly path: number;
  /** Encoded scale / zero-point locations, indexed by Q; undefined = absent. */
  readonly q: readonly (Loc & { readonly dt: number; readonly arg: QuantArg; readonly kind: 'scales' | 'zeroPoints' } | undefined)[];
  /** The post-op chain after the GLU, in order. */
  readonly po: readonly { readonly kind: number; readonly alg: number; readonly alpha: number; readonly beta: number; readonly binary: number; readonly loc: Loc | undefined }[];
}

const DST_TYPES: readonly DataType[] = ['f32', 'bf16', 'f16', 's8', 'u8', 's32', 'f8_e4m3', 'f8_e5m2'];
const INT_SRC: readonly DataType[] = ['s8', 'u8'];
const INT_WEI: readonly DataType[] = ['s8', 'u8', 's4', 'u4'];
const Q_OF: ReadonlyArray<readonly [number, 'scales' | 'zeroPoints', QuantArg]> = [
  [Q.src_scale, 'scales', 'src'], [Q.wei_scale, 'scales', 'weights'], [Q.dst_scale, 'scales', 'dst'],
  [Q.src_zp, 'zeroPoints', 'src'], [Q.wei_zp, 'zeroPoints', 'weights'], [Q.dst_zp, 'zeroPoints', 'dst'],
];

/** Maps an index map over an argument's logical dims onto the job's (g, row, k, n) strides. */
function encode(map: IndexMap, roles: readonly Role[], zeroG: boolean, what: string): Loc | string {
  let st_g = zeroG ? 0 : map.gStride, st_r = 0, st_k = 0, st_n = 0, blk_k = 1, blk_n = 1;
  if (map.strides.length !== roles.length) return `${what}: ${map.strides.length} dims, the kernels expect ${roles.length}`;
  for (let i = 0; i < roles.length; i++) {
    const s = map.strides[i], b = map.blocks[i];
    if (s === 0) continue;
    switch (roles[i]) {
      case 'g': if (b !== 1) return `${what}: groups on the batch/expert dimension`; if (!zeroG) st_g += s; break;
      case 'r': if (b !== 1) return `${what}: groups on rows`; st_r = s; break;
      case 'k': st_k = s; blk_k = b; break;
      case 'n': st_n = s; blk_n = b; break;
    }
  }
  for (const v of [st_g, st_r, st_k, st_n]) if (!Number.isSafeInteger(v) || v < 0 || v > 0x7fffffff) return `${what}: strides beyond 32-bit indexing`;
  return { st_g, st_r, st_k, st_n, blk_k, blk_n };
}

/** Does this problem need anything beyond the original f32 kernel? */
export function needsFused(src: DataType, wei: DataType, dst: DataType, f: Fusion, attr: PrimitiveAttr): boolean {
  return Object.keys(f.scales).length > 0 || Object.keys(f.zeroPoints).length > 0 || f.binary.length > 0 || f.glu !== undefined ||
    [src, wei, dst].some((t) => !FLOAT_TYPES.includes(t)) || epilogueRejection(attr) !== undefined;
}

/**
 * The path and encoded parameters of a problem, or why the kernels cannot run it. `binaryRoles`: roles of
 * the dst coordinates a binary src1 map is over. `zeroGBinary`: binary maps have no group stride (P#3).
 */
export function planFused(src: DataType, wei: DataType, dst: DataType, bias: DataType | undefined, f: Fusion, attr: PrimitiveAttr,
  roles: Roles, binaryRoles: readonly Role[]): FusedPlan | string {
  // glu_backward (PO_DGLU) runs on both paths: alone it stays on the f32 path (wasm_matmul.ts writes its record).
  if (!needsFused(src, wei, dst, f, attr)) return { path: PATH.f32, q: [], po: [] };
  if (!DST_TYPES.includes(dst)) return `dst data type ${dst} is not in the kernels (${DST_TYPES.join(', ')})`;
  if (bias !== undefined && !FLOAT_TYPES.includes(bias)) return `bias data type ${bias} (kernels take f32, bf16, f16)`;
  for (const t of [src, wei] as const) if (!(t in JOB_DT_ALL)) return `data type ${t} is not in the kernels`;
  const q: FusedPlan['q'][number][] = new Array(6).fill(undefined);
  for (const [qi, kind, arg] of Q_OF) {
    const p: QuantParam | undefined = f[kind][arg];
    if (!p) continue;
    if (!(p.dataType in JOB_DT_ALL)) return `${kind === 'scales' ? 'scales' : 'zero points'} of ${arg}: data type ${p.dataType} is not in the kernels`;
    const loc = encode(p.map, roles[arg], roles.zeroG[arg] ?? false, `${kind === 'scales' ? 'scales' : 'zero points'} of ${arg}`);
    if (typeof loc === 'string') return loc;
    if (arg === 'dst' && loc.st_k !== 0) return 'dst scales / zero points varying along K';
    q[qi] = { ...loc, dt: JOB_DT_ALL[p.dataType as keyof typeof JOB_DT_ALL], arg, kind };
  }
  const po: FusedPlan['po'][number][] = [];
  let bi = 0;
  for (const op of attr.postOps.entries) {
    if (op.kind === 'glu') continue;
    if (op.kind === 'glu_backward') {
      // The pointers and strides of PO_DGLU are written by the matmul executor (wasm_matmul.ts).
      po.push({ kind: PO_KIND.dglu, alg: GLU_CODE[op.alg], alpha: op.alpha, beta: op.limit, binary: -1, loc: undefined });
      continue;
    }
    if (op.kind === 'eltwise') po.push({ kind: PO_KIND.eltwise, alg: ELT_CODE_ALL[op.alg], alpha: op.alpha, beta: op.beta, binary: -1, loc: undefined });
    else if (op.kind === 'sum') po.push({ kind: PO_KIND.sum, alg: 0, alpha: op.scale, beta: 0, binary: -1, loc: undefined });
    else {
      const b = f.binary[bi];
      const loc = encode(b.map, binaryRoles, false, `binary post-op ${b.position} src1`);
      if (typeof loc === 'string') return loc;
      if (loc.st_k !== 0 || loc.blk_n !== 1) return `binary post-op ${b.position} src1 layout`;
      // PO.alg of a binary post-op holds src1's element type (job.h DT_*).
      po.push({ kind: op.alg === 'binary_mul' ? PO_KIND.binary_mul : PO_KIND.binary_add, alg: JOB_DT_ALL[b.md.dataType as keyof typeof JOB_DT_ALL], alpha: 0, beta: 0, binary: bi, loc });
      bi++;
    }
  }
  if (po.length > MAX_PO) return `more than ${MAX_PO} post-ops`;
  // Scales / zero points constant along K go to the epilogue; the integer kernel needs all of them so.
  const kvar = [Q.src_scale, Q.wei_scale, Q.src_zp, Q.wei_zp].some((i) => q[i] !== undefined && q[i]!.st_k !== 0);
  const path = INT_SRC.includes(src) && INT_WEI.includes(wei) && !kvar ? PATH.int : PATH.f32_fused;
  return { path, q, po };
}

/** Does a problem with these types and scales / zero points take the integer path? (Its x8 / x4 weights
 * panels then hold codes only: the integer epilogue reads scales / zero points at execution.) */
export function takesIntPath(src: DataType, wei: DataType, f: Fusion, roles: Roles): boolean {
  if (!INT_SRC.includes(src) || !INT_WEI.includes(wei)) return false;
  for (const kind of ['scales', 'zeroPoints'] as const) {
    for (const arg of ['src', 'weights'] as const) {
      const p = f[kind][arg];
      if (!p) continue;
      const loc = encode(p.map, roles[arg], roles.zeroG[arg] ?? false, '');
      if (typeof loc === 'string' || loc.st_k !== 0) return false;
    }
  }
  return true;
}

/** Same plan (path, locations, chain), ignoring pointers: what one job can serve for several experts. */
export function samePlan(a: FusedPlan, b: FusedPlan): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Writes the fused fields of a job: path, bias type, GLU, post-op chain and scale / zero-point locations.
 * `qPtr(kind, arg)` and `binPtr(i)` give each values memory's address and whether it is a per-group
 * pointer table.
 */
export function writeFused(i32: Int32Array, f32: Float32Array, plan: FusedPlan, f: Fusion, biasDt: DataType | undefined,
  qPtr: (kind: 'scales' | 'zeroPoints', arg: QuantArg) => { ptr: number; table: boolean },
  binPtr: (i: number) => { ptr: number; table: boolean }, embedded?: PanelQuant): void {
  const I = (byte: number): number => byte >> 2;
  i32[I(JOB.path)] = plan.path;
  i32[I(JOB.b_dt)] = biasDt ? JOB_DT_ALL[biasDt as keyof typeof JOB_DT_ALL] : 0;
  if (plan.path === PATH.f32) return;
  if (f.glu) {
    i32[I(JOB.glu_alg)] = GLU_CODE[f.glu.alg];
    i32[I(JOB.glu_layout)] = GLU_LAYOUT_CODE[f.glu.layout];
    f32[I(JOB.glu_alpha)] = f.glu.alpha;
    f32[I(JOB.glu_limit)] = f.glu.limit;
  }
  plan.q.forEach((e, qi) => {
    const o = I(JOB.q + qi * QARG.SIZE);
    if (!e) {
      i32.fill(0, o, o + QARG.SIZE / 4);
      i32[o + I(QARG.blk_k)] = 1;
      i32[o + I(QARG.blk_n)] = 1;
      return;
    }
    if (e.arg === 'weights' && embedded?.[e.kind]) {
      // Stored in the weights' panels (gemm-lowp.c `+q`): only the type and the K blocking matter.
      i32.fill(0, o, o + QARG.SIZE / 4);
      i32[o + I(QARG.emb)] = e.kind === 'scales' ? 1 : 2;
      i32[o + I(QARG.dt)] = e.dt;
      i32[o + I(QARG.st_k)] = e.st_k !== 0 ? 8 : 0;
      i32[o + I(QARG.blk_k)] = e.blk_k;
      i32[o + I(QARG.blk_n)] = 1;
      return;
    }
    const { ptr, table } = qPtr(e.kind, e.arg);
    i32[o + I(QARG.ptr)] = ptr;
    i32[o + I(QARG.table)] = table ? 1 : 0;
    i32[o + I(QARG.dt)] = e.dt;
    i32[o + I(QARG.st_g)] = e.st_g;
    i32[o + I(QARG.st_r)] = e.st_r;
    i32[o + I(QARG.st_k)] = e.st_k;
    i32[o + I(QARG.st_n)] = e.st_n;
    i32[o + I(QARG.blk_k)] = e.blk_k;
    i32[o + I(QARG.blk_n)] = e.blk_n;
  });
  for (let qi = plan.q.length; qi < 6; qi++) {
    const o = I(JOB.q + qi * QARG.SIZE);
    i32[o + I(QARG.blk_k)] = 1;
    i32[o + I(QARG.blk_n)] = 1;
  }
  i32[I(JOB.n_po)] = plan.po.length;
  plan.po.forEach((e, k) => {
    const o = I(JOB.po + k * PO.SIZE);
    i32[o + I(PO.kind)] = e.kind;
    i32[o + I(PO.alg)] = e.alg;
    f32[o + I(PO.alpha)] = e.alpha;
    f32[o + I(PO.beta)] = e.beta;
    if (e.loc) {
      const { ptr, table } = binPtr(e.binary);
      i32[o + I(PO.ptr)] = ptr;
      i32[o + I(PO.table)] = table ? 1 : 0;
      i32[o + I(PO.st_g)] = e.loc.st_g;
      i32[o + I(PO.st_r)] = e.loc.st_r;
      i32[o + I(PO.st_n)] = e.loc.st_n;
    }
  });
}

/** The values memory of one scale / zero-point argument (MatmulArgs or one expert's). */
export function quantMemory(a: { scales: Readonly<Partial<Record<QuantArg, Memory>>>; zeroPoints: Readonly<Partial<Record<QuantArg, Memory>>> }, kind: 'scales' | 'zeroPoints', arg: QuantArg): Memory {
  const m = a[kind][arg];
  if (!m) throw new Error(`fused job: missing ${kind} memory of ${arg}`);
  return m;
}

/** Is a values memory addressable with 32-bit element indexes? */
export function fits32(md: MemoryDesc): boolean {
  return md.dims.every((d) => d <= 0x7fffffff) && md.strides.every((s) => s <= 0x7fffffff) && md.spanElems <= 0x7fffffff;
}

/** The weights' scales / zero points as a `+q` layout embeds them (wasm_matmul / grouped_gemm weightsLayout). */
export function panelQuantOf(f: Fusion): PanelQuant | undefined {
  const spec = (q: QuantParam | undefined): PanelQuantSpec | undefined => q && Object.freeze({ dataType: q.dataType, mask: q.mask, groups: Object.freeze([...q.groups]) });
  const scales = spec(f.scales.weights), zeroPoints = spec(f.zeroPoints.weights);
  if (!scales && !zeroPoints) return undefined;
  return Object.freeze({ ...(scales ? { scales } : {}), ...(zeroPoints ? { zeroPoints } : {}) });
}
