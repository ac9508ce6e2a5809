/**
 * Conversions and divisions done on f32 *bit patterns* with integer arithmetic, so that a gpu kernel
 * gives the cpu engine's bits whatever the device does with floats: WGSL lets an implementation flush
 * subnormals, leaves the rounding of `pack2x16float` and the accuracy of `/` (2.5 ULP) open, and may
 * contract `a * b + c` into an FMA. Semantics are those of wasm/src/common.h (f32_to_f16,
 * f32_to_bf16, f16_to_f32) and of IEEE division rounded to nearest even.
 */
export const WGSL_EXACT_HELPERS = /* wgsl */ `
// f32 bits -> f16 bits, round to nearest even; NaN stays a quiet NaN with the top payload bits.
fn ex_f16_bits(u: u32) -> u32 {
  let sign = (u >> 16u) & 0x8000u;
  let ex = (u >> 23u) & 0xffu;
  var mant = u & 0x7fffffu;
  if (ex == 0xffu) { return sign | 0x7c00u | select(0u, 0x200u | (mant >> 13u), mant != 0u); }
  let e = i32(ex) - 112;
  if (e >= 31) { return sign | 0x7c00u; }
  if (e <= 0) {
    if (e < -10) { return sign; }
    mant = mant | 0x800000u;
    let shift = u32(14 - e);
    let half = 1u << (shift - 1u);
    let rem = mant & ((1u << shift) - 1u);
    var r = mant >> shift;
    if (rem > half || (rem == half && (r & 1u) == 1u)) { r += 1u; }
    return sign | r;
  }
  var r = (u32(e) << 10u) | (mant >> 13u);
  let rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) == 1u)) { r += 1u; }
  return sign | r;
}
// f32 bits -> bf16 bits, round to nearest even; NaN stays a quiet NaN.
fn ex_bf16_bits(u: u32) -> u32 {
  if ((u & 0x7fffffffu) > 0x7f800000u) { return (u >> 16u) | 0x40u; }
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
// f16 bits -> f32 bits (exact; subnormal halves become normal floats).
fn ex_f16_to_f32_bits(h: u32) -> u32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) {
    if (m == 0u) { return sign; }
    let p = firstLeadingBit(m);
    return sign | ((p + 103u) << 23u) | ((m << (23u - p)) & 0x7fffffu);
  }
  if (e == 31u) { return sign | 0x7f800000u | (m << 13u); }
  return sign | ((e + 112u) << 23u) | (m << 13u);
}
// |x| of f32 bits (non-zero, finite) as mantissa in [2^23, 2^24) and exponent: |x| = m * 2^(e - 150).
fn ex_split(a: u32) -> vec2i {
  let ex = i32(a >> 23u);
  let m = a & 0x7fffffu;
  if (ex == 0) {
    let sh = 23u - firstLeadingBit(m);
    return vec2i(i32(m << sh), 1 - i32(sh));
  }
  return vec2i(i32(m | 0x800000u), ex);
}
// RNE(a / 127) as f32 bits for a positive finite f32 a (bits): the per-row int8 scale amax / 127.
fn ex_div127(a: u32) -> u32 {
  let d = 127u;
  let s = ex_split(a);
  let ma = u32(s.x);
  let ea = s.y;
  // Normal result: 24 significant bits of ma * 2^k / 127 (k = 7, or 6 when that gives 25), the remainder rounds.
  var k = 7u;
  var q = (ma << k) / d;
  if (q >= 0x1000000u) { k = 6u; q = (ma << k) / d; }
  var r = (ma << k) % d;
  var e = ea - i32(k);
  if (e >= 1) {
    if (2u * r > d || (2u * r == d && (q & 1u) == 1u)) { q += 1u; }
    if (q == 0x1000000u) { q = 0x800000u; e += 1; }
    if (e >= 255) { return 0x7f800000u; }
    return (u32(e) << 23u) | (q & 0x7fffffu);
  }
  // Subnormal result: RNE(|a| / d / 2^-149) = RNE(ma * 2^(ea - 1) / d).
  var num = ma;
  var den = d;
  if (ea >= 1) { num = ma << u32(ea - 1); } else { den = d << u32(1 - ea); }
  q = num / den;
  r = num % den;
  if (2u * r > den || (2u * r == den && (q & 1u) == 1u)) { q += 1u; }
  return q;
}
// RNE(x / s) saturated to [-128, 127] for f32 bits x (finite) and s (positive finite), the real
// quotient (exactly what rint((double)x / (double)s) gives: the quotient of two floats is never
// within 2^-25 of a half-integer unless it is one).
fn ex_quant_s8(xb: u32, sb: u32) -> i32 {
  let ax = xb & 0x7fffffffu;
  let neg = (xb & 0x80000000u) != 0u;
  if (ax == 0u) { return 0; }
  if (sb == 0u) { return select(127, -128, neg); }
  let xs = ex_split(ax);
  let ss = ex_split(sb);
  let mx = u32(xs.x);
  let ms = u32(ss.x);
  let d = xs.y - ss.y;
  var n = 0u;
  if (d >= 8) { n = 256u; }
  else if (d >= -1) {
    let num = mx << u32(d + 1);
    let q2 = num / ms;
    let r = num % ms;
    let qi = q2 >> 1u;
    n = qi;
    if ((q2 & 1u) == 1u && (r != 0u || (qi & 1u) == 1u)) { n = qi + 1u; }
  }
  if (neg) { return max(-i32(n), -128); }
  return min(i32(n), 127);
}
`;
