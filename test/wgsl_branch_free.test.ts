/**
 * The unrolled K loop of `gemv-splitk` is straight-line code, the helper functions it calls included
 * (no `if`, `&&` / `||`, loops, `switch`, early `return`). SwiftShader (the CI's WebGPU) inlines each
 * call, and its compile time explodes with branches there: the fp8 E4M3 decoder's NaN `if` at unroll 8
 * (13 weight loads x 4 columns per loop body) made pipeline creation run for more than 5 minutes and
 * 12 GB (at unroll 4: 3 s), which hung test/gpu_quant.test.ts when session 10's geometry became the
 * default. Pure WGSL text checks: no device needed, and a failure names the function and the construct.
 */
import { describe, expect, it } from 'vitest';
import { dt, type DataType } from '../src/index.js';
import { GEMV_NO_ROWS, gemvSplitKWgsl, type GemvSplitKConfig } from '../src/kernels/wgsl/gemm_splitk_gemv.js';
import { WGSL_16BIT_HELPERS, WGSL_LOWP_HELPERS } from '../src/kernels/wgsl/wgsl_dtypes.js';
import type { FusedOperand, GemmFusion } from '../src/kernels/wgsl/wgsl_quant.js';

/** `fn name(...) ... { body }` of every function in `wgsl`, by name (braces matched). */
function functionBodies(wgsl: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of wgsl.matchAll(/\bfn\s+(\w+)\s*\([^)]*\)[^{]*\{/g)) {
    const open = m.index + m[0].length;
    out.set(m[1], wgsl.slice(open, closingBrace(wgsl, open)));
  }
  return out;
}

/** Index of the `}` closing the block whose body starts at `from`. */
function closingBrace(s: string, from: number): number {
  let depth = 1;
  for (let i = from; i < s.length; i++) {
    if (s[i] === '{') depth++;
    else if (s[i] === '}' && --depth === 0) return i;
  }
  throw new Error('unbalanced braces');
}

const CONTROL = /\b(if|loop|for|while|switch|break|continue|return)\b|&&|\|\|/;

/**
 * The first control-flow construct in `code` or in a function it calls (transitively), as
 * `where: construct`, undefined if none. A function body may end with its one `return`.
 */
function firstBranch(code: string, fns: Map<string, string>, where: string, seen = new Set<string>()): string | undefined {
  const hit = CONTROL.exec(code);
  if (hit) return `${where}: '${hit[0]}' in ${JSON.stringify(code.slice(Math.max(0, hit.index - 40), hit.index + 60))}`;
  for (const m of code.matchAll(/\b([A-Za-z_]\w*)\s*\(/g)) {
    const name = m[1], body = fns.get(name);
    if (body === undefined || seen.has(name)) continue;
    seen.add(name);
    // Only a final `return <expr>;`.
    const lastReturn = body.replace(/\breturn\b([^;]*);\s*$/, '_ = $1;');
    const r = firstBranch(lastReturn, fns, `fn ${name}`, seen);
    if (r) return r;
  }
  return undefined;
}

/** The body of gemv-splitk's `loop` unrolled by `u` (after its `break` test). */
function unrolledLoop(wgsl: string, u: number): string {
  const head = `loop {\n        if (k + ${u}u > kc) { break; }`;
  const at = wgsl.indexOf(head);
  expect(at, `no loop unrolled by ${u}`).toBeGreaterThanOrEqual(0);
  return wgsl.slice(at + head.length, closingBrace(wgsl, at + 'loop {'.length));
}

const op = (d: DataType, dims: FusedOperand['terms']['dims'], g = true): FusedOperand => ({ dt: d, terms: { g, dims } });

/** Weight-only dequantization: per-column scales, or K-blocked scales (and zero points for integer codes). */
function fusionFor(wei: DataType, scaleDt: DataType, srcScale?: DataType): GemmFusion {
  const int = ['s8', 'u8', 's4', 'u4'].includes(wei);
  return {
    weiScale: op(scaleDt, ['u', 'b', 'u']),
    weiZp: int ? op(dt.s8, ['u', 'b', 'u']) : undefined,
    srcScale: srcScale ? op(srcScale, ['-', 'u', 'b'], false) : undefined,
    binary: [], chain: [], intAcc: false,
  };
}

function config(wei: DataType, vec: boolean, fusion: GemmFusion | undefined, rows: number, unroll: number): GemvSplitKConfig {
  return { rows, src: dt.f32, wei, dst: dt.f32, bias: undefined, vec, kSplit: 1, epilogue: '', fusion, moe: GEMV_NO_ROWS, unroll };
}

const WEIGHTS: readonly DataType[] = [dt.f32, dt.f16, dt.bf16, dt.s8, dt.u8, dt.s4, dt.u4, dt.f8_e4m3, dt.f8_e5m2, dt.f4_e2m1];

describe('WGSL decoders are branch-free (SwiftShader compiles them inlined, once per weight)', () => {
  const fns = functionBodies(WGSL_LOWP_HELPERS + WGSL_16BIT_HELPERS);
  const decoders = [...fns.keys()].filter((n) => /^(dec_|ld_|ldi_|byte_of|nib_of)/.test(n));
  it('finds the decoders it checks', () => {
    expect(decoders).toEqual(expect.arrayContaining(['dec_e4m3', 'dec_e5m2', 'dec_e8m0', 'dec_e2m1', 'ld_f16', 'ld_bf16', 'byte_of', 'nib_of', 'ldi_s8']));
  });
  it.each(decoders)('%s', (name) => {
    expect(firstBranch(`${name}(x)`, fns, 'call')).toBeUndefined();
  });
  it('the checker sees a branch in a called helper, through another helper', () => {
    const f = functionBodies('fn a(c: u32) -> f32 { return b(c); }\nfn b(c: u32) -> f32 { if (c == 1u) { return 0.0; } return 1.0; }');
    expect(firstBranch('let w = a(q);', f, 'loop')).toMatch(/^fn b: 'if'/);
    expect(firstBranch('let w = select(1.0, 2.0, (q == 1u) && (q == 2u));', f, 'loop')).toMatch(/'&&'/);
    expect(firstBranch('let w = select(1.0, 2.0, (q == 1u) & (q == 2u));', f, 'loop')).toBeUndefined();
  });
});

describe("gemv-splitk's unrolled K loops are straight-line code, called helpers included", () => {
  const cases: [string, GemvSplitKConfig][] = [];
  for (const wei of WEIGHTS) {
    for (const vec of [true, false]) {
      const scaleDt = wei === dt.f4_e2m1 ? dt.e8m0 : wei === dt.f8_e5m2 ? dt.f8_e4m3 : dt.f32;
      const float = wei === dt.f32 || wei === dt.f16 || wei === dt.bf16;
      // Session 10's geometry (8 rows, unroll 8) and the previous one (4 rows, unroll 4); a src scale
      // of an 8-bit float type is read per element inside the loop.
      cases.push([`${wei} ${vec ? 'vector' : 'scalar'} loads, 8 rows, unroll 8`, config(wei, vec, float ? undefined : fusionFor(wei, scaleDt), 8, 8)]);
      cases.push([`${wei} ${vec ? 'vector' : 'scalar'} loads, 4 rows, unroll 4, f8_e4m3 src scales`, config(wei, vec, fusionFor(wei, scaleDt, dt.f8_e4m3), 4, 4)]);
    }
  }
  cases.push(['f8_e4m3 vector loads, e8m0 src scales, 1 row, unroll 16', config(dt.f8_e4m3, true, fusionFor(dt.f8_e4m3, dt.f32, dt.e8m0), 1, 16)]);
  it.each(cases)('%s', (_n, c) => {
    const wgsl = gemvSplitKWgsl(c);
    const fns = functionBodies(wgsl);
    for (const u of new Set([c.unroll ?? 4, 4])) expect(firstBranch(unrolledLoop(wgsl, u), fns, `loop unrolled by ${u}`)).toBeUndefined();
  });
});
