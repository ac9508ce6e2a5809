/** Marks a dimension whose size is known only at execution time (oneDNN `DNNL_RUNTIME_DIM_VAL`). */
export const RUNTIME_DIM_VAL = Number.MIN_SAFE_INTEGER;

export type Dims = readonly number[];

export function isRuntime(d: number): boolean {
  return d === RUNTIME_DIM_VAL;
}

export function product(dims: Dims): number {
  let p = 1;
  for (const d of dims) p *= d;
  return p;
}

export function dimsToString(dims: Dims): string {
  return dims.map((d) => (isRuntime(d) ? '*' : String(d))).join('x');
}

export function dimsEqual(a: Dims, b: Dims): boolean {
  if (a.length !== b.length) return false;
  // A plain loop: argument checks compare descriptors on every execute.
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Row-major (dense) element strides for `dims`. */
export function denseStrides(dims: Dims): number[] {
  const s = new Array<number>(dims.length);
  let acc = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= Math.max(dims[i], 1);
  }
  return s;
}
