/**
 * Maps a problem onto groupdnn's API: memory descriptors (grouped for `--grouped`), the matmul's
 * PrimitiveAttr (scales, zero points, post-ops) and what the reference needs to mirror it. What
 * groupdnn cannot express is a ProblemRejection('unimplemented') naming the reason; the primitive
 * descriptor itself rejects the rest (its DnnlError message becomes the reason).
 *
 * Knob -> API:
 * - `--grouped=0:G:...` `total_MxK:GxKxN`: src `memory.desc.grouped([M, K], dt, G, [RUNTIME_DIM_VAL, K])`,
 *   weights `memory.desc([G, K, N], dt, wtag)`, dst grouped like src; offsets from the cumulative ends.
 * - `--grouped=1:G:...` `Mxtotal_K:total_KxN`: src grouped on columns, weights grouped on rows, dst [G, M, N].
 * - `--attr-scales` / `--attr-zero-points`: `attr.setScales / setZeroPoints(arg, mask, groups, dt)`,
 *   masks over the argument's logical dims (weights of grouped M: [G, K, N]), GROUPS padded with
 *   leading 1s; mask 0 of a grouped src / dst is one value per group (a `common` value repeated).
 * - `--attr-post-ops`: eltwise -> `appendEltwise`, sum -> `appendSum`, mul / add -> `appendBinary`
 *   with src1 [G, 1] (mask 0: per group), [M, 1] (mask 1: per row), [G, N] (mask 2: per column, the
 *   row repeated per group), [M, N] (mask 3; grouped with the `grouped` tag); the per-group shapes are
 *   [G, 1, 1|N] when total_M = G (the library reads a 2D [G, ...] src1 as per row then).
 * - `--attr-fpmath`: groupdnn has no fpmath attribute; it always computes in f32, which every fpmath
 *   mode allows, so the knob is accepted and changes nothing.
 */
import { ARG, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, memory, type DataType, type EltwiseAlg } from '../../src/index.js';
import { isDataType, type QuantEntry } from './attr_spec.js';
import { ProblemRejection, type Problem, type Shape } from './problem.js';

export interface QuantPlan {
  readonly arg: 'src' | 'wei' | 'dst';
  readonly kind: 'scales' | 'zero_points';
  readonly mask: number;
  /** One entry per dim of the argument's logical tensor. */
  readonly groups: readonly number[];
  readonly dataType: DataType;
  /** The `common` policy's value, repeated over every value. */
  readonly common: number | undefined;
  readonly perGroup: boolean;
  readonly dims: readonly number[];
}

export interface BinaryPlan {
  readonly position: number;
  readonly alg: 'mul' | 'add';
  readonly md: MemoryDesc;
  readonly dims: readonly number[];
  readonly byGroup: boolean;
  /** mask 2 of grouped M: one row of N values, repeated for every group. */
  readonly replicated: boolean;
}

export type PlanPostOp =
  | { readonly kind: 'eltwise'; readonly alg: string; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'sum'; readonly scale: number }
  | { readonly kind: 'binary'; readonly plan: BinaryPlan };

export interface Plan {
  readonly shape: Shape;
  readonly srcMd: MemoryDesc;
  readonly weiMd: MemoryDesc;
  readonly dstMd: MemoryDesc;
  readonly bias: { readonly md: MemoryDesc; readonly dims: readonly number[] } | undefined;
  readonly attr: PrimitiveAttr;
  readonly quant: readonly QuantPlan[];
  readonly postOps: readonly PlanPostOp[];
  readonly transcendental: boolean;
  readonly hasSum: boolean;
}

/** groupdnn's eltwise algorithms (src/attr/eltwise.ts); others are UNIMPLEMENTED. */
const ELTWISE: readonly string[] = [
  'relu', 'gelu_erf', 'gelu_tanh', 'swish', 'logistic', 'tanh', 'linear', 'clip', 'abs', 'square', 'exp',
  'elu', 'sqrt', 'soft_relu', 'log', 'clip_v2', 'pow', 'round', 'mish', 'hardswish', 'hardsigmoid',
];
/**
 * Post-ops whose f32 result is not the correctly rounded one: approximations of exp / log / tanh / erf, or
 * several roundings (pow by repeated multiplication; hardswish / hardsigmoid with an alpha such as 0.166667
 * that f32 does not hold exactly; sqrt, which WGSL computes as 1 / inverseSqrt, not correctly rounded). Their
 * f32 dst gets 2^-20 (compare.ts).
 */
const TRANSCENDENTAL: readonly string[] = ['gelu_erf', 'gelu_tanh', 'swish', 'logistic', 'tanh', 'exp', 'elu', 'soft_relu', 'log', 'pow', 'mish', 'hardswish', 'hardsigmoid', 'sqrt'];
/** benchdnn's `_dst` algorithms (`*_use_dst_for_bwd`) have the same forward as the plain ones. */
const forwardAlg = (alg: string): string => (alg.endsWith('_dst') ? alg.slice(0, -'_dst'.length) : alg);

const unimplemented = (msg: string): never => {
  throw new ProblemRejection('unimplemented', msg);
};
const invalid = (msg: string): never => {
  throw new ProblemRejection('invalid_arguments', msg);
};

const rowMajor = (nd: number): string => 'abcdefghijkl'.slice(0, nd);

/** Element strides of a plain tag (letters = dims, outermost first). */
function tagStrides(t: string, dims: readonly number[], what: string): number[] {
  if (t.length !== dims.length) invalid(`--${what}=${t}: the tensor has ${dims.length} dims`);
  const strides = new Array<number>(dims.length).fill(0);
  let s = 1;
  for (let i = t.length - 1; i >= 0; i--) {
    const d = t.charCodeAt(i) - 97;
    if (d < 0 || d >= dims.length || strides[d] !== 0) invalid(`--${what}=${t}: not a permutation of ${dims.length} dims`);
    strides[d] = s;
    s *= Math.max(1, dims[d]);
  }
  return strides;
}

/** A tag for a plain descriptor: `any` stays, others are checked against the rank. */
function plainTag(t: string, nd: number, what: string): string {
  if (t !== 'any' && t.length !== nd) invalid(`--${what}=${t}: the tensor has ${nd} dims`);
  return t;
}

function groupedMd(dims: readonly number[], dt: DataType, G: number, varDim: number, t: string, what: string): MemoryDesc {
  const gd = dims.map((d, i) => (i === varDim ? RUNTIME_DIM_VAL : d));
  const strides = t === 'any' ? undefined : tagStrides(t, dims, what);
  return memory.desc.grouped([...dims], dt, G, gd, 's32', strides);
}

/** The logical dims of each argument, as masks see them. */
function argDims(s: Shape): Record<'src' | 'wei' | 'dst', readonly number[]> {
  if (s.kind === 'grouped_m') return { src: [s.M, s.K], wei: [s.G, s.K, s.N], dst: [s.M, s.N] };
  if (s.kind === 'grouped_k') return { src: [s.M, s.K], wei: [s.K, s.N], dst: [s.G, s.M, s.N] };
  return { src: s.src, wei: s.wei, dst: s.dst };
}

/** knobs_attr.md POLICY -> mask over an argument of `nd` dims (matmul's per_oc / per_ocic overloads). */
function policyMask(policy: string, arg: 'src' | 'wei' | 'dst', nd: number, grouped: boolean): number {
  if (/^\d+$/.test(policy)) return Number(policy);
  // per_dim_0, per_dim_01, per_dim_012, ...: one bit per digit.
  if (/^per_dim_[0-9]+$/.test(policy)) return [...policy.slice('per_dim_'.length)].reduce((m, d) => m | (1 << Number(d)), 0);
  switch (policy) {
    case 'common': case 'host_scalar': return 0;
    case 'per_tensor': return (1 << nd) - 1;
    case 'per_oc': return arg !== 'wei' ? 2 : grouped ? 3 : 1 << (nd - 1);
    case 'per_ocic': return arg !== 'wei' ? 3 : grouped ? 6 : (1 << (nd - 1)) | (1 << (nd - 2));
    default: return invalid(`unknown policy ${policy}`);
  }
}

const ARG_OF: Record<string, 'src' | 'wei' | 'dst'> = { src: 'src', src0: 'src', wei: 'wei', dst: 'dst' };
export const ARG_ID: Record<'src' | 'wei' | 'dst', number> = { src: ARG.SRC, wei: ARG.WEIGHTS, dst: ARG.DST };

function quantPlan(e: QuantEntry, kind: 'scales' | 'zero_points', s: Shape): QuantPlan {
  const arg = ARG_OF[e.arg] ?? unimplemented(`--attr-${kind === 'scales' ? 'scales' : 'zero-points'}: argument ${e.arg} does not exist in matmul`);
  const dims = argDims(s)[arg];
  const nd = dims.length;
  const mask = policyMask(e.policy, arg, nd, s.kind === 'grouped_m');
  if (mask >= 1 << nd) invalid(`${kind} of ${arg}: mask ${mask} names dims beyond the argument's ${nd}`);
  if (e.groups.length > nd) invalid(`${kind} of ${arg}: GROUPS ${e.groups.join('x')} has more entries than the argument's ${nd} dims`);
  const groups = [...new Array<number>(nd - e.groups.length).fill(1), ...e.groups];
  if (kind === 'zero_points' && e.value !== undefined && !Number.isInteger(e.value)) invalid(`zero point ${e.value} of ${arg} is not an integer`);
  // rfcs/0002 tables: mask 0 is one value per group for grouped M src / dst and grouped K src / weights.
  const perGroup = mask === 0 && ((s.kind === 'grouped_m' && arg !== 'wei') || (s.kind === 'grouped_k' && arg !== 'dst'));
  const dataType = isDataType(e.dataType) ? e.dataType : unimplemented(`data type ${e.dataType} is not implemented in groupdnn`);
  return { arg, kind, mask, groups, dataType, common: e.value, perGroup, dims };
}

function binaryPlan(op: Extract<Problem['postOps']['ops'][number], { kind: 'binary' }>, position: number, s: Shape): BinaryPlan {
  if (op.alg !== 'mul' && op.alg !== 'add') unimplemented(`post-op binary_${op.alg} is not implemented (groupdnn: binary_mul, binary_add)`);
  const alg = op.alg as 'mul' | 'add';
  const dataType = isDataType(op.dataType) ? op.dataType : unimplemented(`data type ${op.dataType} is not implemented in groupdnn`);
  const dst = argDims(s).dst;
  const nd = dst.length;
  const mask = policyMask(op.maskInput, 'dst', nd, false);
  if (mask >= 1 << nd) invalid(`binary post-op ${position}: mask ${mask} names dims beyond dst's ${nd}`);
  const grouped = op.tag === 'grouped';
  if (s.kind === 'grouped_m') {
    const { G, M, N } = s;
    if (grouped) {
      if (mask !== 3) invalid(`binary post-op ${position}: the grouped tag needs mask 3 (a full [total_M, N] tensor), got ${mask}`);
      const md = memory.desc.grouped([M, N], dataType, G, [RUNTIME_DIM_VAL, N]);
      return { position, alg, md, dims: [M, N], byGroup: false, replicated: false };
    }
    const tag2 = op.tag === 'any' ? 'ab' : op.tag;
    // When total_M = G a 2D [G, 1|N] src1 is per row to the library (rfcs/0002 section 4): per group is
    // then [G, 1, 1|N] (the extent-1 dim b outermost keeps the 2D tag's strides).
    const md = (dims: number[], byGroup: boolean): MemoryDesc => (byGroup && M === G
      ? memory.desc([dims[0], 1, dims[1]], dataType, `b${tag2.replace('b', 'c')}`)
      : memory.desc(dims, dataType, tag2));
    const pick = (dims: number[], byGroup: boolean, replicated = false): BinaryPlan =>
      ({ position, alg, md: md(dims, byGroup), dims, byGroup, replicated });
    if (mask === 0) return pick([G, 1], true);
    if (mask === 1) return pick([M, 1], false);
    if (mask === 2) return pick([G, N], true, true);
    return pick([M, N], false);
  }
  if (grouped) invalid(`binary post-op ${position}: the grouped tag needs a grouped dst (--grouped=0:...)`);
  const dims = dst.map((d, i) => (((mask >> i) & 1) === 1 ? d : 1));
  return { position, alg, md: memory.desc(dims, dataType, op.tag === 'any' ? rowMajor(nd) : op.tag), dims, byGroup: false, replicated: false };
}

function descriptors(p: Problem, s: Shape): Pick<Plan, 'srcMd' | 'weiMd' | 'dstMd'> {
  const [sdt, wdt, ddt] = p.dt;
  const [rs, rw] = p.rtDimsMasks;
  if ((rs || rw) && s.kind !== 'dense') unimplemented('--runtime_dims_masks with --grouped: the grouped descriptors already take their group sizes at run time; groupdnn has no runtime totals');
  if (s.kind === 'grouped_m') {
    return {
      srcMd: groupedMd([s.M, s.K], sdt, s.G, 0, p.stag, 'stag'),
      weiMd: memory.desc([s.G, s.K, s.N], wdt, plainTag(p.wtag, 3, 'wtag')),
      dstMd: groupedMd([s.M, s.N], ddt, s.G, 0, p.dtag, 'dtag'),
    };
  }
  if (s.kind === 'grouped_k') {
    return {
      srcMd: groupedMd([s.M, s.K], sdt, s.G, 1, p.stag, 'stag'),
      weiMd: groupedMd([s.K, s.N], wdt, s.G, 0, p.wtag, 'wtag'),
      dstMd: memory.desc([s.G, s.M, s.N], ddt, plainTag(p.dtag, 3, 'dtag')),
    };
  }
  // benchdnn: runtime dims need a user-given layout for the affected arguments.
  const rd = rs | rw;
  if ((rs && p.stag === 'any') || (rw && p.wtag === 'any') || (rd && p.dtag === 'any')) {
    invalid('runtime dimensions require a memory format for the affected arguments (--stag, --wtag, --dtag)');
  }
  const rt = (dims: readonly number[], m: number): number[] => dims.map((d, i) => (((m >> i) & 1) === 1 ? RUNTIME_DIM_VAL : d));
  const nd = s.dst.length;
  const dstMask = (rs & (1 << (nd - 2))) | (rw & (1 << (nd - 1))) | (rd & ((1 << (nd - 2)) - 1));
  return {
    srcMd: memory.desc(rt(s.src, rs), sdt, plainTag(p.stag, nd, 'stag')),
    weiMd: memory.desc(rt(s.wei, rw), wdt, plainTag(p.wtag, nd, 'wtag')),
    dstMd: memory.desc(rt(s.dst, dstMask), ddt, plainTag(p.dtag, nd, 'dtag')),
  };
}

function biasPlan(p: Problem, s: Shape): Plan['bias'] {
  if (p.biaDt === 'undef') return undefined;
  if (s.kind === 'grouped_m') {
    if (p.biaMask !== 2) invalid(`--bia_mask=${p.biaMask}: grouped matmul takes bia_mask=2 only (bias [G, N], one row per group)`);
    return { md: memory.desc([s.G, s.N], p.biaDt, 'ab'), dims: [s.G, s.N] };
  }
  const dst = argDims(s).dst;
  if (p.biaMask >= 1 << dst.length) invalid(`--bia_mask=${p.biaMask} names dims beyond dst's ${dst.length}`);
  const dims = dst.map((d, i) => (((p.biaMask >> i) & 1) === 1 ? d : 1));
  return { md: memory.desc(dims, p.biaDt, rowMajor(dims.length)), dims };
}

/** Builds the descriptors and attribute of a problem; throws ProblemRejection or the library's DnnlError. */
export function planOf(p: Problem, s: Shape): Plan {
  for (const t of [...p.dt, p.biaDt]) if (t !== 'undef' && !isDataType(t)) unimplemented(`data type ${t} is not implemented in groupdnn`);
  const attr = new PrimitiveAttr();
  const quant: QuantPlan[] = [];
  for (const [spec, kind] of [[p.scales, 'scales'], [p.zeroPoints, 'zero_points']] as const) {
    for (const e of spec.entries) {
      const q = quantPlan(e, kind, s);
      if (kind === 'scales') attr.setScales(ARG_ID[q.arg], q.mask, e.groups.length ? q.groups : [], q.dataType);
      else attr.setZeroPoints(ARG_ID[q.arg], q.mask, e.groups.length ? q.groups : [], q.dataType);
      quant.push(q);
    }
  }
  const postOps: PlanPostOp[] = [];
  p.postOps.ops.forEach((op, i) => {
    if (op.kind === 'other') throw new ProblemRejection('unimplemented', `post-op ${op.name} is not implemented in groupdnn's matmul`);
    if (op.kind === 'sum') {
      if (op.zeroPoint !== 0 || op.dataType !== 'undef') unimplemented('post-op sum: groupdnn takes a scale only (no zero point or data type)');
      attr.postOps.appendSum(op.scale);
      postOps.push({ kind: 'sum', scale: op.scale });
    } else if (op.kind === 'eltwise') {
      const alg = forwardAlg(op.alg);
      if (!ELTWISE.includes(alg)) unimplemented(`post-op eltwise_${op.alg} is not implemented in groupdnn`);
      if (op.scale !== 1) unimplemented('post-op eltwise: groupdnn takes no eltwise SCALE');
      attr.postOps.appendEltwise(`eltwise_${alg}` as EltwiseAlg, op.alpha, op.beta);
      postOps.push({ kind: 'eltwise', alg, alpha: op.alpha, beta: op.beta });
    } else {
      const plan = binaryPlan(op, i, s);
      attr.postOps.appendBinary(plan.alg === 'mul' ? 'binary_mul' : 'binary_add', plan.md);
      postOps.push({ kind: 'binary', plan });
    }
  });
  return {
    shape: s,
    ...descriptors(p, s),
    bias: biasPlan(p, s),
    attr,
    quant,
    postOps,
    transcendental: postOps.some((o) => o.kind === 'eltwise' && TRANSCENDENTAL.includes(o.alg)),
    hasSum: postOps.some((o) => o.kind === 'sum'),
  };
}
