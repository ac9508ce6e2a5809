/**
 * WGSL ports of the cpu kernels' exp and logistic (wasm/src/vmath.h `v_exp`, `v_logistic`): the same
 * polynomial, constants and f32 operations in the same order, so a gpu kernel that must agree with the
 * cpu engine (moe.routing scores) does not depend on the device's `exp` (WGSL's is not correctly
 * rounded: 3 + 2|x| ULP). Bits still may differ by an ulp or two where the driver fuses a multiply and
 * an add (SPIR-V allows the contraction) or divides to 2.5 ULP (WGSL's `/`).
 *
 * Callers pass no NaN. Infinities are built from a runtime value (`zero`-or-ed bits), never a
 * constant expression, which WGSL refuses to evaluate to an infinity.
 */
export const WGSL_VMATH = /* wgsl */ `
fn vm_ldexp(p: f32, n: f32) -> f32 {
  let ni = i32(n);
  let h = ni >> 1u;
  let l = ni - h;
  let ph = bitcast<f32>(u32(h + 127) << 23u);
  let pl = bitcast<f32>(u32(l + 127) << 23u);
  return (p * pl) * ph;
}
fn vm_exp(x: f32) -> f32 {
  let hi = 88.72283935546875f;
  let lo = -103.97208f;
  let xm = select(lo, x, lo < x);
  let xc = select(hi, xm, xm < hi);
  let n = round(xc * 1.44269504088896341f);
  var r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  let r2 = r * r;
  var p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = (p * r2 + r) + 1.0f;
  var y = vm_ldexp(p, n);
  if (x > hi) { y = bitcast<f32>(0x7f800000u | (bitcast<u32>(x) & 0u)); }
  if (x < lo) { y = 0.0f; }
  return y;
}
fn vm_logistic(x: f32) -> f32 {
  let e = vm_exp(-abs(x));
  let r = 1.0f / (1.0f + e);
  return select(r, e * r, x < 0.0f);
}
`;
