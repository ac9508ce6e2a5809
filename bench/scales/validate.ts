/**
 * Sanity checks on the scales results: orderings that quantization theory predicts for this
 * workload, the library-vs-emulation agreement, and the byte accounting. A check whose recipes did
 * not run is reported as n/a with the reason.
 */
import type { Check, Result } from './report.js';
import { implOk, sci } from './report.js';

export function validate(results: readonly Result[], dims: { E: number; K: number; N: number }): Check[] {
  const byId = new Map(results.map((r) => [r.recipe.id, r]));
  const checks: Check[] = [];
  const err = (id: string): number | undefined => {
    const r = byId.get(id);
    return r?.status === 'ok' && implOk(r) ? r.err?.relFro : undefined;
  };
  const why = (...ids: string[]): string => ids.map((id) => {
    const r = byId.get(id);
    return !r ? `${id} not selected` : r.status !== 'ok' ? `${id} ${r.status}` : !implOk(r) ? `${id} computed a wrong result` : '';
  }).filter(Boolean).join(', ');

  /** err(worse) >= factor * err(better). */
  const worse = (name: string, worseId: string, betterId: string, factor: number): void => {
    const a = err(worseId), b = err(betterId);
    if (a === undefined || b === undefined) {
      checks.push({ name, pass: undefined, detail: `not run (${why(worseId, betterId)})` });
      return;
    }
    checks.push({ name, pass: a >= factor * b, detail: `${worseId} ${sci(a, 3)} vs ${betterId} ${sci(b, 3)}: ratio ${(a / b).toFixed(2)} (want >= ${factor})` });
  };
  /** Errors non-increasing along the list (finer granularity never worse, 2% slack). */
  const monotone = (name: string, ids: string[]): void => {
    const v = ids.map(err);
    const have = ids.filter((_, i) => v[i] !== undefined);
    if (have.length < 2) {
      checks.push({ name, pass: undefined, detail: `not run (${why(...ids)})` });
      return;
    }
    const vals = have.map((id) => err(id)!);
    const pass = vals.every((x, i) => i === 0 || x <= vals[i - 1] * 1.02);
    checks.push({ name, pass, detail: have.map((id, i) => `${id} ${sci(vals[i], 3)}`).join(' > ') + (have.length < ids.length ? ` (missing: ${why(...ids)})` : '') });
  };

  worse('per-tensor s8 activations are clearly worse than per-row on outlier activations', 'a8t-w8col', 'a8row-w8col', 2);
  {
    const a = byId.get('a8row-w8t'), b = byId.get('a8row-w8col');
    const name = 'per-tensor s8 weights are worse than per-column (weight operand error)';
    if (a && b) checks.push({ name, pass: a.opErr.wei >= 1.2 * b.opErr.wei, detail: `weights rel. error ${sci(a.opErr.wei, 3)} vs ${sci(b.opErr.wei, 3)}: ratio ${(a.opErr.wei / b.opErr.wei).toFixed(2)} (want >= 1.2); in the W8A8 output the activation error dominates: ${sci(err('a8row-w8t'), 3)} vs ${sci(err('a8row-w8col'), 3)}` });
    else checks.push({ name, pass: undefined, detail: `not selected (${why('a8row-w8t', 'a8row-w8col')})` });
  }
  worse('K-blocks (1x32) beat per-row for s8 activations with outlier channels', 'a8row-w8col', 'a8k32-w8k32', 2);
  worse('MXFP4 is clearly worse than MXFP8', 'mxfp4', 'mxfp8-e4m3', 2);
  worse('the OCP floor e8m0 scale (block maxima of e4m3 saturate at 448) is worse than a rounded-up scale', 'mxfp8-e4m3', 'mxfp8-e4m3-ceil', 1.05);
  worse('s4 is worse than s8 at the same granularity (K128)', 'w4-k128', 'w8-k128', 4);
  worse('f8_e5m2 (2 mantissa bits) is worse than f8_e4m3 (3 bits), per-row x per-column', 'e5m2-row-col', 'e4m3-row-col', 1.5);
  worse('MXFP4 (e8m0 per 32) is worse than NVFP4 (e4m3 per 16 + f32 global)', 'mxfp4', 'nvfp4', 1.05);
  worse('power-of-two e8m0 scales (MXFP8) are worse than f32 scales on the same 32-blocks', 'mxfp8-e4m3', 'e4m3-k32', 1.0);
  worse('4-bit weight-only is worse than bf16 weights', 'w4-k32', 'bf16w', 10);
  monotone('finer s4 weight blocks never hurt: tensor > column > 128 > 64 > 32', ['w4-tensor', 'w4-col', 'w4-k128', 'w4-k64', 'w4-k32']);
  monotone('finer s8 blocks never hurt (W8A8): row/col > 1x128 > 1x64 > 1x32', ['a8row-w8col', 'a8k128-w8k128', 'a8k64-w8k64', 'a8k32-w8k32']);

  // The f32 baseline is the f32-accumulated product: error at f32 rounding level.
  const f = byId.get('f32');
  if (f?.status === 'ok' && f.err) checks.push({ name: 'f32 baseline matches the float64 product to f32 accumulation accuracy', pass: f.err.relFro < 1e-5, detail: `rel.Frob ${sci(f.err.relFro, 3)} (want < 1e-5)` });
  else checks.push({ name: 'f32 baseline matches the float64 product', pass: undefined, detail: `not run (${why('f32')})` });

  // The library computes what the recipe says: its output equals the float64 product of the dequantized operands.
  const ran = results.filter((r) => r.status === 'ok' && r.implCheck);
  if (ran.length) {
    const worst = ran.reduce((a, b) => (b.implCheck!.relFro > a.implCheck!.relFro ? b : a));
    const bad = ran.filter((r) => !implOk(r));
    checks.push({
      name: 'library output = float64 product of the dequantized operands (every recipe that ran)',
      pass: bad.length === 0,
      detail: `${ran.length} recipes; worst ${worst.recipe.id} rel.Frob ${sci(worst.implCheck!.relFro, 2)}, max rel ${sci(worst.implCheck!.maxRel, 2)} (want < 1e-5)${bad.length ? `; off: ${bad.map((r) => `${r.recipe.id} ${sci(r.implCheck!.relFro, 2)}`).join(', ')}` : ''}`,
    });
  } else checks.push({ name: 'library output = float64 product of the dequantized operands', pass: undefined, detail: 'no recipe ran' });

  // Byte accounting against closed forms.
  const { K, N } = dims;
  const expectBits: Record<string, number> = {
    f32: 32,
    'w8-col': 8 + 32 / K,
    'w4-k128': 4 + 32 / 128,
    'w4-b128': 4 + 32 / (128 * 128),
    'u4zp-k128': 4 + 16 / 128 + 4 / 128,
    'mxfp8-e4m3': 8 + 8 / 32,
    mxfp4: 4 + 8 / 32,
    nvfp4: 4 + 8 / 16 + 32 / (K * N),
  };
  const bitRows = Object.entries(expectBits).filter(([id]) => byId.has(id));
  if (bitRows.length) {
    const off = bitRows.filter(([id, b]) => Math.abs(byId.get(id)!.bytes.bitsPerWeight - b) > 1e-9);
    checks.push({
      name: 'bits per weight match the closed forms (e.g. s4 + f32 per 128 = 4.25, NVFP4 = 4.5 + f32/expert)',
      pass: off.length === 0,
      detail: bitRows.map(([id, b]) => `${id} ${byId.get(id)!.bytes.bitsPerWeight.toFixed(4)}${Math.abs(byId.get(id)!.bytes.bitsPerWeight - b) > 1e-9 ? ` (want ${b.toFixed(4)})` : ''}`).join(', '),
    });
  }
  return checks;
}
