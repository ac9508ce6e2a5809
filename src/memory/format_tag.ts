import { DnnlError } from '../common/status.js';
import { RUNTIME_DIM_VAL, isRuntime, type Dims } from '../common/dims.js';

/**
 * Plain format tags. A tag names the dimensions from outermost to innermost: `acb` on `[G,K,N]`
 * stores N before K (each expert's weights as an N x K row-major matrix, like `nn.Linear`).
 * `any` lets the primitive descriptor choose (packed weights).
 */
export const tag = {
  any: 'any',
  x: 'a',
  a: 'a',
  ab: 'ab',
  ba: 'ba',
  abc: 'abc',
  acb: 'acb',
  bac: 'bac',
  abcd: 'abcd',
} as const;
export type FormatTag = (typeof tag)[keyof typeof tag] | string;

/** Element strides of a plain tag; throws `invalid_arguments` for a tag that is not a permutation of the dims. */
export function tagToStrides(formatTag: string, dims: Dims, argName: string): number[] {
  const nd = dims.length;
  const letters = formatTag.split('');
  const valid =
    letters.length === nd &&
    new Set(letters).size === nd &&
    letters.every((c) => c >= 'a' && c.charCodeAt(0) < 'a'.charCodeAt(0) + nd);
  if (!valid) {
    throw new DnnlError('invalid_arguments', `${argName}: format tag '${formatTag}' does not match ${nd} dimension(s)`);
  }
  const strides = new Array<number>(nd);
  let acc = 1;
  for (let i = nd - 1; i >= 0; i--) {
    const d = letters[i].charCodeAt(0) - 97;
    strides[d] = acc;
    if (isRuntime(acc) || isRuntime(dims[d])) acc = RUNTIME_DIM_VAL;
    else acc *= Math.max(dims[d], 1);
  }
  return strides;
}

/** The plain tag that produces `strides` for `dims`, or undefined for padded / exotic strides. */
export function stridesToTag(dims: Dims, strides: Dims): string | undefined {
  const nd = dims.length;
  const order = [...Array(nd).keys()].sort((x, y) => strides[y] - strides[x] || x - y);
  const candidate = order.map((d) => String.fromCharCode(97 + d)).join('');
  const expect = tagToStrides(candidate, dims, 'strides');
  return expect.every((s, i) => s === strides[i] || dims[i] === 1) ? candidate : undefined;
}
