import { DnnlError } from './status.js';

/**
 * Misspelt option keys (`routing: { renormalise: true }`) would otherwise be ignored silently and the
 * default used. Every public options object is checked against the list of its keys.
 */

/**
 * The keys of an options type, written once beside the type: the record must name every key of `T`
 * (a key added to the interface and not here is a compile error, so the list cannot fall behind).
 */
export function optionKeys<T>(keys: { readonly [K in keyof Required<T>]: true }): readonly string[] {
  return Object.freeze(Object.keys(keys));
}

/** Levenshtein distance, to suggest the key a typo meant (lists are short, keys too). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1].toLowerCase() === b[j - 1].toLowerCase() ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/**
 * Throws `invalid_arguments` naming `where` and the first key of `obj` not in `valid`, with the valid
 * keys (and the nearest one when it is a likely typo). `undefined` / non-objects are left to the
 * caller's own checks.
 */
export function checkOptionKeys(where: string, obj: unknown, valid: readonly string[]): void {
  if (obj === null || typeof obj !== 'object') return;
  for (const key of Object.keys(obj)) {
    if (valid.includes(key)) continue;
    const near = valid.map((v) => [v, distance(key, v)] as const).filter(([v, d]) => d <= Math.max(1, Math.floor(Math.max(key.length, v.length) / 3))).sort((x, y) => x[1] - y[1])[0];
    throw new DnnlError('invalid_arguments', `${where}: unknown option '${key}'${near ? ` (did you mean '${near[0]}'?)` : ''}; valid options: ${valid.join(', ')}`);
  }
}
