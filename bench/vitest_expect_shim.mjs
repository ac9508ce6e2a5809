// The few matchers of vitest's `expect` that the test runners reused by bench/grouped_gemm_fuzz.ts call, for use
// outside vitest's runner (plain JS: module hooks resolve 'vitest' here, past tsx's loader): a failed expectation
// throws an Error naming the message and both values.
import { isDeepStrictEqual } from 'node:util';

function matchers(got, what, negate) {
  const check = (ok, rule, want) => {
    if (ok === negate) throw new Error(`${what ? `${what}: ` : ''}expected ${JSON.stringify(got)} ${negate ? 'not ' : ''}${rule} ${JSON.stringify(want)}`);
  };
  return {
    toBe: (want) => check(Object.is(got, want), 'to be', want),
    toEqual: (want) => check(isDeepStrictEqual(got, want), 'to equal', want),
    toMatch: (re) => check(typeof got === 'string' && (typeof re === 'string' ? got.includes(re) : re.test(got)), 'to match', String(re)),
    toContain: (item) => check((typeof got === 'string' || Array.isArray(got)) && got.includes(item), 'to contain', item),
  };
}

export function expect(got, what) {
  return { ...matchers(got, what, false), not: matchers(got, what, true) };
}
