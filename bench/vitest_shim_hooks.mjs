import { URL } from 'node:url';
// Node module hooks for bench/grouped_gemm_fuzz.ts: 'vitest' resolves to vitest_expect_shim.mjs (its runner is not
// there to back vitest's own expect).
export async function resolve(specifier, context, next) {
  if (specifier === 'vitest') return { url: new URL('./vitest_expect_shim.mjs', import.meta.url).href, shortCircuit: true };
  return next(specifier, context);
}
