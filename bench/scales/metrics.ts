/** Error metrics of a result against a float64 reference. */

export interface ErrorStats {
  /** ||y - r||_F / ||r||_F. */
  readonly relFro: number;
  /** max |y - r|. */
  readonly maxAbs: number;
  /** max |r|, to read maxAbs against. */
  readonly maxRef: number;
  /** <y, r> / (||y|| ||r||). */
  readonly cosine: number;
  /** Signal-to-quantization-noise ratio, dB: -20 log10(relFro). */
  readonly sqnrDb: number;
}

/** Compares rows `rows` of y (row-major, `cols` wide; `yRows` maps a row index to y's row) with r ([rows.length, cols]). */
export function errorStats(y: ArrayLike<number>, r: ArrayLike<number>, rows: ArrayLike<number>, cols: number, yRowOf: (i: number) => number = (i) => rows[i]): ErrorStats {
  let ee = 0, rr = 0, yy = 0, yr = 0, maxAbs = 0, maxRef = 0;
  for (let i = 0; i < rows.length; i++) {
    const yb = yRowOf(i) * cols, rb = i * cols;
    for (let n = 0; n < cols; n++) {
      const a = y[yb + n], b = r[rb + n];
      const d = a - b;
      ee += d * d;
      rr += b * b;
      yy += a * a;
      yr += a * b;
      const ad = Math.abs(d);
      if (ad > maxAbs || ad !== ad) maxAbs = ad;
      const ab = Math.abs(b);
      if (ab > maxRef) maxRef = ab;
    }
  }
  const relFro = Math.sqrt(ee / rr);
  return { relFro, maxAbs, maxRef, cosine: yr / Math.sqrt(yy * rr), sqnrDb: -20 * Math.log10(relFro) };
}

/** Relative Frobenius error of a dequantized operand against the original values. */
export function relError(x: ArrayLike<number>, q: ArrayLike<number>): number {
  let ee = 0, xx = 0;
  for (let i = 0; i < x.length; i++) {
    const d = q[i] - x[i];
    ee += d * d;
    xx += x[i] * x[i];
  }
  return Math.sqrt(ee / xx);
}

/** Median of a list (upper median for an even count, as bench/timing.ts). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
