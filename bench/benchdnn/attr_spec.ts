/**
 * benchdnn's attribute knobs (knobs_attr.md), parsed into plain data; how each maps onto groupdnn's
 * PrimitiveAttr is decided per problem (setup.ts), since masks depend on the problem's shape.
 *   --attr-scales=ARG:POLICY[:SCALE][:DATA_TYPE[:GROUPS]][+...]
 *   --attr-zero-points=ARG:POLICY[:ZEROPOINT][:DATA_TYPE[:GROUPS]][+...]
 *   --attr-post-ops=SUM[:SCALE[:ZERO_POINT[:DATA_TYPE]]] | ELTWISE[:ALPHA[:BETA[:SCALE]]] | BINARY:DT[:MASK_INPUT[:TAG]] [+...]
 *   --attr-fpmath=MATHMODE[:APPLY_TO_INT]
 */
import { dt, type DataType } from '../../src/index.js';

/** oneDNN data types groupdnn does not have: accepted by the parser, UNIMPLEMENTED per problem. */
export const ONEDNN_ONLY_DTS: readonly string[] = ['f64', 'tf32', 'u3', 'u2', 's2', 'u1', 'f4_e3m0', 'f8_e8m0', 'bin', 'boolean'];

/** A data type name groupdnn knows (benchdnn's names: f32, bf16, s8, f8_e4m3, ...). */
export function isDataType(x: string): x is DataType {
  return x !== 'undef' && (Object.values(dt) as string[]).includes(x);
}

export interface QuantEntry {
  /** As written: src, src0, wei, dst, ... */
  readonly arg: string;
  /** As written: common, per_dim_0, per_oc, ..., or an integer mask. */
  readonly policy: string;
  /** SCALE / ZEROPOINT of the common / host_scalar policies. */
  readonly value: number | undefined;
  /** A groupdnn data type, or a oneDNN-only name (u3, ...) that setup.ts reports UNIMPLEMENTED. */
  readonly dataType: DataType | string;
  /** GROUPS as written (e.g. 32x1), applying to the argument's last dims. */
  readonly groups: readonly number[];
}

/** One `--attr-scales` or `--attr-zero-points` value: zero or more `+`-joined entries. */
export interface QuantSpec {
  readonly entries: readonly QuantEntry[];
  readonly text: string;
}

export type PostOpSpec =
  | { readonly kind: 'sum'; readonly scale: number; readonly zeroPoint: number; readonly dataType: string }
  | { readonly kind: 'eltwise'; readonly alg: string; readonly alpha: number; readonly beta: number; readonly scale: number }
  | { readonly kind: 'binary'; readonly alg: string; readonly dataType: DataType | string; readonly maskInput: string; readonly tag: string }
  | { readonly kind: 'other'; readonly name: string };

export interface PostOpsSpec {
  readonly ops: readonly PostOpSpec[];
  readonly text: string;
}

export interface FpmathSpec {
  readonly mode: 'strict' | 'bf16' | 'f16' | 'tf32' | 'any';
  readonly applyToInt: boolean;
  readonly text: string;
}

/** Eltwise algorithms benchdnn knows (knobs_attr.md); which groupdnn has is decided in setup.ts. */
export const ELTWISE_NAMES: readonly string[] = [
  'abs', 'exp', 'exp_dst', 'gelu_erf', 'gelu_tanh', 'log', 'logistic', 'logistic_dst', 'mish', 'round', 'sqrt', 'sqrt_dst',
  'square', 'tanh', 'tanh_dst', 'elu', 'elu_dst', 'relu', 'relu_dst', 'soft_relu', 'swish', 'clip', 'clip_v2', 'clip_v2_dst',
  'hardsigmoid', 'hardswish', 'linear', 'pow',
];
export const BINARY_NAMES: readonly string[] = ['add', 'div', 'eq', 'ge', 'gt', 'le', 'lt', 'max', 'min', 'mul', 'ne', 'sub', 'select'];
const OTHER_POST_OPS = /^(dw|prelu)/;
const QUANT_ARGS = ['src', 'src0', 'src1', 'wei', 'dst'];
const POLICIES = ['common', 'host_scalar', 'per_dim_0', 'per_dim_1', 'per_dim_01', 'per_dim_2', 'per_dim_3', 'per_oc', 'per_ocic', 'per_tensor'];

const isNumber = (s: string | undefined): s is string => s !== undefined && s !== '' && Number.isFinite(Number(s));

function parseGroups(s: string, what: string): number[] {
  const g = s.split('x').map((v) => (/^\d+$/.test(v) ? Number(v) : NaN));
  if (g.some((v) => !(v >= 1))) throw new Error(`${what}: GROUPS '${s}' must be positive integers joined by 'x'`);
  return g;
}

function parseQuantEntry(entry: string, knob: string, defaultDt: DataType): QuantEntry {
  const f = entry.split(':');
  const what = `${knob}=${entry}`;
  const arg = f[0];
  if (!QUANT_ARGS.includes(arg) && !/^msrc\d+$/.test(arg)) throw new Error(`${what}: unknown ARG '${arg}' (src, wei, dst, src1, msrcN)`);
  const policy = f[1];
  if (policy === undefined || (!POLICIES.includes(policy) && !/^\d+$/.test(policy) && !/^per_dim_[0-9]+$/.test(policy))) {
    throw new Error(`${what}: POLICY '${policy ?? ''}' must be an integer mask or one of ${POLICIES.join(', ')}`);
  }
  let i = 2;
  let value: number | undefined;
  if ((policy === 'common' || policy === 'host_scalar') && isNumber(f[i])) value = Number(f[i++]);
  let dataType: DataType | string = defaultDt;
  if (f[i] !== undefined) {
    if (!isDataType(f[i]) && !ONEDNN_ONLY_DTS.includes(f[i])) throw new Error(`${what}: '${f[i]}' is not a data type`);
    dataType = f[i++];
  }
  const groups = f[i] !== undefined ? parseGroups(f[i++], what) : [];
  if (i < f.length) throw new Error(`${what}: unexpected '${f.slice(i).join(':')}'`);
  return { arg, policy, value, dataType, groups };
}

/** `--attr-scales` / `--attr-zero-points` value (empty: no attribute). */
export function parseQuant(text: string, knob: '--attr-scales' | '--attr-zero-points'): QuantSpec {
  const def: DataType = knob === '--attr-scales' ? 'f32' : 's32';
  const entries = text === '' ? [] : text.split('+').map((e) => parseQuantEntry(e, knob, def));
  const args = entries.map((e) => (e.arg === 'src0' ? 'src' : e.arg));
  if (new Set(args).size !== args.length) throw new Error(`${knob}=${text}: an ARG appears twice`);
  return { entries, text };
}

function parsePostOp(entry: string): PostOpSpec {
  const f = entry.split(':');
  const what = `--attr-post-ops=${entry}`;
  const name = f[0];
  const num = (i: number, d: number): number => {
    if (f[i] === undefined) return d;
    if (!isNumber(f[i])) throw new Error(`${what}: '${f[i]}' is not a number`);
    return Number(f[i]);
  };
  if (name === 'sum') {
    if (f.length > 4) throw new Error(`${what}: sum takes SCALE, ZERO_POINT and DATA_TYPE at most`);
    return { kind: 'sum', scale: num(1, 1), zeroPoint: num(2, 0), dataType: f[3] ?? 'undef' };
  }
  const elt = name.startsWith('eltwise_') ? name.slice('eltwise_'.length) : name;
  if (ELTWISE_NAMES.includes(elt)) {
    if (f.length > 4) throw new Error(`${what}: eltwise takes ALPHA, BETA and SCALE at most`);
    return { kind: 'eltwise', alg: elt, alpha: num(1, 0), beta: num(2, 0), scale: num(3, 1) };
  }
  const bin = name.startsWith('binary_') ? name.slice('binary_'.length) : name;
  if (BINARY_NAMES.includes(bin)) {
    if (f[1] === undefined || (!isDataType(f[1]) && !ONEDNN_ONLY_DTS.includes(f[1]))) throw new Error(`${what}: binary needs a data type DT, got '${f[1] ?? ''}'`);
    if (f.length > 4) throw new Error(`${what}: binary takes DT, MASK_INPUT and TAG at most`);
    const maskInput = f[2] ?? 'common';
    if (!/^\d+$/.test(maskInput) && !POLICIES.includes(maskInput)) throw new Error(`${what}: MASK_INPUT '${maskInput}' must be an integer or a policy (${POLICIES.join(', ')})`);
    return { kind: 'binary', alg: bin, dataType: f[1] as DataType, maskInput, tag: f[3] ?? 'any' };
  }
  if (OTHER_POST_OPS.test(name)) return { kind: 'other', name };
  throw new Error(`${what}: unknown post-op '${name}'`);
}

/** `--attr-post-ops` value (empty: no post-ops). */
export function parsePostOps(text: string): PostOpsSpec {
  return { ops: text === '' ? [] : text.split('+').map(parsePostOp), text };
}

const FPMATH_MODES = ['strict', 'bf16', 'f16', 'tf32', 'any'] as const;

/** `--attr-fpmath` value; APPLY_TO_INT defaults to true when MATHMODE is given. */
export function parseFpmath(text: string): FpmathSpec {
  if (text === '') return { mode: 'strict', applyToInt: false, text };
  const [mode, apply, ...rest] = text.split(':');
  if (!(FPMATH_MODES as readonly string[]).includes(mode)) throw new Error(`--attr-fpmath=${text}: MATHMODE '${mode}' must be one of ${FPMATH_MODES.join(', ')}`);
  if (rest.length || (apply !== undefined && !['true', 'false', '1', '0'].includes(apply))) throw new Error(`--attr-fpmath=${text}: APPLY_TO_INT must be true or false`);
  return { mode: mode as FpmathSpec['mode'], applyToInt: apply === undefined || apply === 'true' || apply === '1', text };
}
