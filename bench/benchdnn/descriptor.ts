/**
 * benchdnn matmul problem descriptors: `d0x..xMxK:d0x..xKxN[:d0x..xMxN][nNAME]` (driver_matmul.md).
 * With `--grouped` the same text reads `total_MxK:GxKxN` (M grouped) or `Mxtotal_K:total_KxN`
 * (K grouped); the shapes are checked against the grouping in problem.ts.
 */

export interface Descriptor {
  readonly src: readonly number[];
  readonly wei: readonly number[];
  /** The optional third tensor, as written. */
  readonly dst: readonly number[] | undefined;
  readonly name: string;
  /** The descriptor as written (repro lines print it back). */
  readonly text: string;
}

function dims(s: string, what: string): number[] {
  if (!/^\d+(x\d+)*$/.test(s)) throw new Error(`problem '${what}': '${s}' is not a list of dims joined by 'x'`);
  return s.split('x').map(Number);
}

export function parseDescriptor(text: string): Descriptor {
  const m = /^([\dx:]+)(?:n(.*))?$/.exec(text);
  if (!m) throw new Error(`problem '${text}': expected d0x..xMxK:d0x..xKxN[:d0x..xMxN][nNAME]`);
  const parts = m[1].split(':');
  if (parts.length < 2 || parts.length > 3) throw new Error(`problem '${text}': expected two or three tensors separated by ':'`);
  const [src, wei, dst] = parts.map((p) => dims(p, text));
  const name = (m[2] ?? '').replace(/^"(.*)"$/, '$1');
  return { src, wei, dst, name, text };
}
