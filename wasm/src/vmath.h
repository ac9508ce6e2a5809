/* f32x4 transcendental functions for the fused epilogue: exp, logistic, tanh, erf and the GELUs.
   Plain mul + add (never FMA), so both builds give the same bits. Relative error vs double < 1e-6
   over the whole f32 range where the result is a normal number (checked by test/vmath.test.ts):
   - exp: Cody-Waite reduction by ln2 and the Cephes expf polynomial; 2^n applied in two halves so
     that results down to the subnormal range and up to FLT_MAX are exact scalings.
   - logistic: e = exp(-|x|), 1/(1+e) or e/(1+e): never overflows, relative accuracy on both tails.
   - tanh: x + x^3 T(x^2) below 0.625, else 1 - 2/(exp(2|x|) + 1), sign restored.
   - erf: x P(x^2) below 1, else 1 - erfc(|x|), erfc(a) = exp(-a^2) Q(1/a) (Q fitted on [1, 6]).
   - gelu_tanh(x) = x * logistic(2 y), y = sqrt(2/pi) (x + 0.044715 x^3) (= 0.5 x (1 + tanh y), without
     the cancellation of 1 + tanh y for negative x).
   - gelu_erf(x) = 0.5 x (1 + erf(x / sqrt 2)), as 0.5 x erfc(-x / sqrt 2) below -sqrt 2. The rounding
     of x / sqrt 2 limits its relative accuracy on the far negative tail (~2e-6 at x = -8, where
     |gelu| < 1e-14).
   - log: Cephes logf (mantissa in [sqrt(1/2), sqrt 2), a degree-9 polynomial, ln2 split in two);
     subnormals scaled by 2^23 first; log(0) = -Inf, log(x < 0) = NaN.
   - expm1 (elu): e^x - 1 as a Taylor polynomial for |x| < 1/2 (no cancellation), exp(x) - 1 beyond.
   - log1p (soft_relu, on (0, 1]): u = 1 + t, log(u) * t / (u - 1) (Goldberg: exact where u rounds).
   - soft_relu(x) = (max(z, 0) + log1p(e^-|z|)) / alpha, z = alpha x: never overflows.
   - mish(x) = x tanh(ln(1 + e^x)) = x n / (n + 2), n = e^x (e^x + 2) (no tanh, no cancellation); x
     past 20 gives x (tanh is 1 in f32 there).
   - pow(x, beta): an integral |beta| <= 64 by repeated squaring (sign from beta's parity, 1/r for
     negative beta), else exp(beta log x) (NaN below 0, as powf). */
#pragma once
#include "common.h"

#define VF(c) wasm_f32x4_splat(c)
#define VADD wasm_f32x4_add
#define VSUB wasm_f32x4_sub
#define VMUL wasm_f32x4_mul

/* p * 2^n for integral float n in [-150, 128]: two exact scalings by 2^(n/2) and 2^(n - n/2) (each
   a normal power of two), so only the last one rounds (into the subnormal range). */
INLINE v128_t v_ldexp(v128_t p, v128_t n) {
  const v128_t ni = wasm_i32x4_trunc_sat_f32x4(n);
  const v128_t h = wasm_i32x4_shr(ni, 1);
  const v128_t l = wasm_i32x4_sub(ni, h);
  const v128_t bias = wasm_i32x4_splat(127);
  const v128_t ph = wasm_i32x4_shl(wasm_i32x4_add(h, bias), 23);
  const v128_t pl = wasm_i32x4_shl(wasm_i32x4_add(l, bias), 23);
  return VMUL(VMUL(p, pl), ph);
}

INLINE v128_t v_exp(v128_t x) {
  const v128_t hi = VF(88.72283935546875f), lo = VF(-103.97208f);
  const v128_t xc = wasm_f32x4_pmin(hi, wasm_f32x4_pmax(lo, x));
  const v128_t n = wasm_f32x4_nearest(VMUL(xc, VF(1.44269504088896341f)));
  v128_t r = VSUB(xc, VMUL(n, VF(0.693359375f)));
  r = VSUB(r, VMUL(n, VF(-2.12194440e-4f)));
  const v128_t r2 = VMUL(r, r);
  v128_t p = VF(1.9875691500E-4f);
  p = VADD(VMUL(p, r), VF(1.3981999507E-3f));
  p = VADD(VMUL(p, r), VF(8.3334519073E-3f));
  p = VADD(VMUL(p, r), VF(4.1665795894E-2f));
  p = VADD(VMUL(p, r), VF(1.6666665459E-1f));
  p = VADD(VMUL(p, r), VF(5.0000001201E-1f));
  p = VADD(VADD(VMUL(p, r2), r), VF(1.0f));
  v128_t y = v_ldexp(p, n);
  y = wasm_v128_bitselect(VF(__builtin_inff()), y, wasm_f32x4_gt(x, hi));
  y = wasm_v128_bitselect(VF(0.0f), y, wasm_f32x4_lt(x, lo));
  return wasm_v128_bitselect(x, y, wasm_f32x4_ne(x, x)); /* NaN in, NaN out */
}

INLINE v128_t v_abs(v128_t x) { return wasm_f32x4_abs(x); }
INLINE v128_t v_copysign(v128_t mag, v128_t sgn) {
  const v128_t m = wasm_i32x4_splat((int32_t)0x80000000);
  return wasm_v128_or(wasm_v128_andnot(mag, m), wasm_v128_and(sgn, m));
}

/* 1 / (1 + exp(-x)) */
INLINE v128_t v_logistic(v128_t x) {
  const v128_t e = v_exp(wasm_f32x4_neg(v_abs(x)));
  const v128_t r = wasm_f32x4_div(VF(1.0f), VADD(VF(1.0f), e));
  return wasm_v128_bitselect(VMUL(e, r), r, wasm_f32x4_lt(x, VF(0.0f)));
}

INLINE v128_t v_tanh(v128_t x) {
  const v128_t a = v_abs(x);
  const v128_t z = VMUL(x, x);
  v128_t t = VF(0.0022929413236903555f);
  t = VADD(VMUL(t, z), VF(-0.008344148901963628f));
  t = VADD(VMUL(t, z), VF(0.02176899429790256f));
  t = VADD(VMUL(t, z), VF(-0.053959271658272925f));
  t = VADD(VMUL(t, z), VF(0.13333303633144983f));
  t = VADD(VMUL(t, z), VF(-0.3333333317340132f));
  const v128_t small = VADD(x, VMUL(VMUL(z, x), t));
  const v128_t e = v_exp(VADD(a, a));
  const v128_t big = v_copysign(VSUB(VF(1.0f), wasm_f32x4_div(VF(2.0f), VADD(e, VF(1.0f)))), x);
  return wasm_v128_bitselect(small, big, wasm_f32x4_lt(a, VF(0.625f)));
}

/* erf(x) / x for |x| < 1, a polynomial in x^2. */
INLINE v128_t v_erf_small(v128_t x) {
  const v128_t z = VMUL(x, x);
  v128_t p = VF(7.854026326871433e-05f);
  p = VADD(VMUL(p, z), VF(-0.0008010247659407249f));
  p = VADD(VMUL(p, z), VF(0.0051883345022822325f));
  p = VADD(VMUL(p, z), VF(-0.02685381607033449f));
  p = VADD(VMUL(p, z), VF(0.11283585270822155f));
  p = VADD(VMUL(p, z), VF(-0.37612625839751235f));
  p = VADD(VMUL(p, z), VF(1.1283791657323474f));
  return p;
}

/* erfc(a) / exp(-a^2) for a >= 1: Q(a) fitted on [1, 6] in 1/a; beyond 6 the asymptotic series
   1/(a sqrt(pi)) (1 - 1/(2a^2) + 3/(4a^4)) (relative error < 5e-5 there, where erfc < 2e-17).
   Apart so that dglu.h can share exp(-a^2) between erfc and the normal density. */
INLINE v128_t v_erfc_q(v128_t a) {
  const v128_t u = wasm_f32x4_div(VF(1.0f), a);
  const v128_t s = VSUB(wasm_f32x4_pmax(u, VF(1.0f / 6.0f)), VF(0.58f));
  v128_t q = VF(0.053761120415378456f);
  q = VADD(VMUL(q, s), VF(-0.02542326501671487f));
  q = VADD(VMUL(q, s), VF(-0.030674322277622762f));
  q = VADD(VMUL(q, s), VF(0.05440927241971381f));
  q = VADD(VMUL(q, s), VF(-0.05925275973899749f));
  q = VADD(VMUL(q, s), VF(0.035121676568563076f));
  q = VADD(VMUL(q, s), VF(0.038511063460253486f));
  q = VADD(VMUL(q, s), VF(-0.17797061212871848f));
  q = VADD(VMUL(q, s), VF(0.39805595690594f));
  q = VADD(VMUL(q, s), VF(0.2883972273252244f));
  const v128_t u2 = VMUL(u, u);
  const v128_t asym = VMUL(VMUL(u, VF(0.56418958354775628f)), VADD(VF(1.0f), VMUL(u2, VADD(VF(-0.5f), VMUL(u2, VF(0.75f))))));
  return wasm_v128_bitselect(asym, q, wasm_f32x4_gt(a, VF(6.0f)));
}

/* erfc(a) for a >= 1: exp(-a^2) Q(a). */
INLINE v128_t v_erfc_big(v128_t a) {
  return VMUL(v_exp(wasm_f32x4_neg(VMUL(a, a))), v_erfc_q(a));
}

INLINE v128_t v_erf(v128_t x) {
  const v128_t a = v_abs(x);
  const v128_t small = VMUL(x, v_erf_small(x));
  const v128_t big = v_copysign(VSUB(VF(1.0f), v_erfc_big(wasm_f32x4_pmax(a, VF(1.0f)))), x);
  return wasm_v128_bitselect(small, big, wasm_f32x4_lt(a, VF(1.0f)));
}

/* 0.5 x (1 + erf(x / sqrt 2)); below x = -sqrt 2 as 0.5 x erfc(|x| / sqrt 2), accurate on the tail. */
INLINE v128_t v_gelu_erf(v128_t x) {
  const v128_t z = VMUL(x, VF(0.70710678118654752f));
  const v128_t a = v_abs(z);
  const v128_t small = VADD(VF(1.0f), VMUL(z, v_erf_small(z)));
  const v128_t ec = v_erfc_big(wasm_f32x4_pmax(a, VF(1.0f)));
  const v128_t big = wasm_v128_bitselect(ec, VSUB(VF(2.0f), ec), wasm_f32x4_lt(z, VF(0.0f)));
  return VMUL(VMUL(VF(0.5f), x), wasm_v128_bitselect(small, big, wasm_f32x4_lt(a, VF(1.0f))));
}

INLINE v128_t v_gelu_tanh(v128_t x) {
  const v128_t y = VMUL(VF(0.7978845608028654f), VADD(x, VMUL(VF(0.044715f), VMUL(VMUL(x, x), x))));
  return VMUL(x, v_logistic(VADD(y, y)));
}

/* log(x): Cephes logf. */
INLINE v128_t v_log(v128_t x) {
  /* subnormals: scale into the normal range first */
  const v128_t sub = wasm_f32x4_lt(x, VF(1.17549435e-38f));
  const v128_t xs = wasm_v128_bitselect(VMUL(x, VF(8388608.0f)), x, sub);
  const v128_t bits = xs;
  v128_t e = wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_shr(bits, 23), wasm_i32x4_splat(126)));
  e = wasm_v128_bitselect(VSUB(e, VF(23.0f)), e, sub);
  /* mantissa in [0.5, 1) */
  v128_t m = wasm_v128_or(wasm_v128_and(bits, wasm_i32x4_splat(0x007fffff)), wasm_i32x4_splat(0x3f000000));
  const v128_t lo = wasm_f32x4_lt(m, VF(0.707106781186547524f));
  m = wasm_v128_bitselect(VSUB(VADD(m, m), VF(1.0f)), VSUB(m, VF(1.0f)), lo);
  e = wasm_v128_bitselect(VSUB(e, VF(1.0f)), e, lo);
  const v128_t z = VMUL(m, m);
  v128_t y = VF(7.0376836292E-2f);
  y = VADD(VMUL(y, m), VF(-1.1514610310E-1f));
  y = VADD(VMUL(y, m), VF(1.1676998740E-1f));
  y = VADD(VMUL(y, m), VF(-1.2420140846E-1f));
  y = VADD(VMUL(y, m), VF(1.4249322787E-1f));
  y = VADD(VMUL(y, m), VF(-1.6668057665E-1f));
  y = VADD(VMUL(y, m), VF(2.0000714765E-1f));
  y = VADD(VMUL(y, m), VF(-2.4999993993E-1f));
  y = VADD(VMUL(y, m), VF(3.3333331174E-1f));
  y = VMUL(VMUL(y, m), z);
  y = VADD(y, VMUL(e, VF(-2.12194440e-4f)));
  y = VSUB(y, VMUL(z, VF(0.5f)));
  v128_t r = VADD(VADD(m, y), VMUL(e, VF(0.693359375f)));
  r = wasm_v128_bitselect(x, r, wasm_f32x4_eq(x, VF(__builtin_inff()))); /* log(Inf) = Inf */
  r = wasm_v128_bitselect(VF(-__builtin_inff()), r, wasm_f32x4_eq(x, VF(0.0f)));
  r = wasm_v128_bitselect(VF(__builtin_nanf("")), r, wasm_f32x4_lt(x, VF(0.0f)));
  return wasm_v128_bitselect(x, r, wasm_f32x4_ne(x, x)); /* NaN in, NaN out */
}

/* e^x - 1 */
INLINE v128_t v_expm1(v128_t x) {
  v128_t p = VF(1.0f / 362880.0f);
  p = VADD(VMUL(p, x), VF(1.0f / 40320.0f));
  p = VADD(VMUL(p, x), VF(1.0f / 5040.0f));
  p = VADD(VMUL(p, x), VF(1.0f / 720.0f));
  p = VADD(VMUL(p, x), VF(1.0f / 120.0f));
  p = VADD(VMUL(p, x), VF(1.0f / 24.0f));
  p = VADD(VMUL(p, x), VF(1.0f / 6.0f));
  p = VADD(VMUL(p, x), VF(0.5f));
  const v128_t small = VADD(x, VMUL(VMUL(x, x), p));
  const v128_t big = VSUB(v_exp(x), VF(1.0f));
  return wasm_v128_bitselect(small, big, wasm_f32x4_lt(v_abs(x), VF(0.5f)));
}

/* log(1 + t) for t >= 0 */
INLINE v128_t v_log1p(v128_t t) {
  const v128_t u = VADD(VF(1.0f), t);
  const v128_t d = VSUB(u, VF(1.0f));
  const v128_t r = VMUL(v_log(u), wasm_f32x4_div(t, d));
  return wasm_v128_bitselect(t, r, wasm_f32x4_eq(d, VF(0.0f)));
}

/* ln(1 + e^(alpha x)) / alpha */
INLINE v128_t v_soft_relu(v128_t x, float alpha) {
  const v128_t z = VMUL(x, VF(alpha));
  const v128_t r = VADD(wasm_f32x4_pmax(z, VF(0.0f)), v_log1p(v_exp(wasm_f32x4_neg(v_abs(z)))));
  return alpha == 1.0f ? r : wasm_f32x4_div(r, VF(alpha));
}

/* x tanh(ln(1 + e^x)) = x n / (n + 2), n = e^x (e^x + 2) */
INLINE v128_t v_mish(v128_t x) {
  const v128_t e = v_exp(wasm_f32x4_pmin(x, VF(20.0f)));
  const v128_t n = VMUL(e, VADD(e, VF(2.0f)));
  const v128_t r = VMUL(x, wasm_f32x4_div(n, VADD(n, VF(2.0f))));
  return wasm_v128_bitselect(x, r, wasm_f32x4_gt(x, VF(20.0f)));
}

/* alpha x^beta */
INLINE v128_t v_pow(v128_t x, float alpha, float beta) {
  v128_t r;
  const float ab = __builtin_fabsf(beta);
  if (beta == __builtin_floorf(beta) && ab <= 64.0f) {
    uint32_t k = (uint32_t)ab;
    v128_t b = x, acc = VF(1.0f);
    while (k) { /* repeated squaring: the sign comes out right by itself */
      if (k & 1u) acc = VMUL(acc, b);
      k >>= 1;
      if (k) b = VMUL(b, b);
    }
    r = beta < 0.0f ? wasm_f32x4_div(VF(1.0f), acc) : acc;
  } else {
    r = v_exp(VMUL(VF(beta), v_log(x)));
    r = wasm_v128_bitselect(beta > 0.0f ? VF(0.0f) : VF(__builtin_inff()), r, wasm_f32x4_eq(x, VF(0.0f)));
  }
  return alpha == 1.0f ? r : VMUL(VF(alpha), r);
}

/* max(0, min(1, alpha x + beta)); pmin(v, c) / pmax(v, c) return a NaN v, as the formula does */
INLINE v128_t v_hardsigmoid(v128_t x, float alpha, float beta) {
  return wasm_f32x4_pmax(wasm_f32x4_pmin(VADD(VMUL(x, VF(alpha)), VF(beta)), VF(1.0f)), VF(0.0f));
}

/* One eltwise algorithm (oneDNN semantics; see src/attr/eltwise.ts). */
INLINE v128_t v_eltwise(v128_t x, int alg, float alpha, float beta) {
  switch (alg) {
    case 1: { /* relu */
      const v128_t neg = VMUL(x, VF(alpha));
      return wasm_v128_bitselect(x, neg, wasm_f32x4_gt(x, VF(0.0f)));
    }
    case 2: return VADD(VMUL(x, VF(alpha)), VF(beta));                               /* linear */
    case 3: return wasm_f32x4_pmin(wasm_f32x4_pmax(x, VF(alpha)), VF(beta));         /* clip (a NaN x stays) */
    case 4: return wasm_f32x4_abs(x);                                               /* abs */
    case 5: return VMUL(x, x);                                                      /* square */
    case 6: return v_gelu_erf(x);                                                   /* gelu_erf */
    case 7: return v_gelu_tanh(x);                                                  /* gelu_tanh */
    case 8: return VMUL(x, v_logistic(VMUL(x, VF(alpha))));                         /* swish */
    case 9: return v_logistic(x);                                                   /* logistic */
    case 10: return v_tanh(x);                                                      /* tanh */
    case 11: return v_exp(x);                                                       /* exp */
    case 12: {                                                                      /* elu */
      const v128_t neg = VMUL(VF(alpha), v_expm1(wasm_f32x4_pmin(x, VF(0.0f))));
      return wasm_v128_bitselect(x, neg, wasm_f32x4_gt(x, VF(0.0f)));
    }
    case 13: return wasm_f32x4_sqrt(x);                                             /* sqrt */
    case 14: return v_soft_relu(x, alpha);                                          /* soft_relu */
    case 15: return v_log(x);                                                       /* log */
    case 16: return v_pow(x, alpha, beta);                                          /* pow */
    case 17: return wasm_f32x4_nearest(x);                                          /* round (half to even) */
    case 18: return v_mish(x);                                                      /* mish */
    case 19: return VMUL(x, v_hardsigmoid(x, alpha, beta));                         /* hardswish */
    case 20: return v_hardsigmoid(x, alpha, beta);                                  /* hardsigmoid */
    default: return x;
  }
}
