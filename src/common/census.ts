/**
 * Counts of the objects user code creates (descriptors, memory objects, attributes, primitive
 * descriptors, primitives), so the proposal comparison can report them without instrumenting examples.
 */
export type CensusKind = 'memory_desc' | 'memory' | 'attr' | 'primitive_desc' | 'primitive';

const counts: Record<CensusKind, number> = { memory_desc: 0, memory: 0, attr: 0, primitive_desc: 0, primitive: 0 };

/** @internal */
export function countObject(kind: CensusKind): void {
  counts[kind]++;
}

let pdMs = 0;

/** @internal adds the creation time of a primitive descriptor. */
export function countPdTime(ms: number): void {
  pdMs += ms;
}

/** A snapshot of the counters since process start, plus total primitive-descriptor creation time. */
export function objectCensus(): Readonly<Record<CensusKind, number>> & { readonly pd_creation_ms: number } {
  return { ...counts, pd_creation_ms: pdMs };
}
