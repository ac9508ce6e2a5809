/**
 * The contract every proposal example implements, so `npm run compare` runs them on the same work.
 * User code in each example sits between `// user-code-begin` and `// user-code-end`: those lines are
 * what the comparison counts.
 */
import { ARG, Engine, Memory, Stream, dt, memory, reorder, tag } from 'groupdnn';

export interface MoeShape {
  readonly E: number;
  readonly K: number;
  readonly N: number;
  /** Rows of the routed buffers: tokens x top-k. */
  readonly capacity: number;
}

export interface ProposalRunner {
  /** Where routed tokens go ([capacity, K] row-major f32), written before each step. */
  readonly srcValues: Float32Array;
  /** Results ([capacity, N] row-major f32) of the last step. */
  readonly dstValues: Float32Array;
  /** One step with a new routing: all the host work the proposal needs, then execute (no wait). */
  step(sizes: readonly number[]): void;
}

/** Builds a proposal's objects for a shape; `weights` is the [E, K, N] abc weights memory. */
export type ProposalFactory = (eng: Engine, strm: Stream, shape: MoeShape, weights: Memory) => ProposalRunner;

/** Runs one example standalone: a small MoE layer, two steps with different routing, a checksum. */
export async function demo(name: string, factory: ProposalFactory): Promise<void> {
  const shape: MoeShape = { E: 4, K: 64, N: 48, capacity: 24 };
  const eng = await Engine.create();
  const strm = new Stream(eng);
  const weights = Memory.create(memory.desc([shape.E, shape.K, shape.N], dt.f32, tag.abc), eng);
  (weights.values as Float32Array).forEach((_, i, a) => (a[i] = Math.sin(i) / 8));
  const run = factory(eng, strm, shape, weights);
  for (const sizes of [[10, 0, 6, 8], [0, 24, 0, 0]]) {
    run.srcValues.forEach((_, i, a) => (a[i] = Math.cos(i)));
    run.step(sizes);
    await strm.wait();
    let sum = 0;
    for (const v of run.dstValues) sum += v;
    console.log(`${name}: rows per expert ${sizes.join(',')} -> checksum ${sum.toFixed(6)}`);
  }
  eng.release();
}

/** True when the module is the process entry point (run directly with tsx). */
export function isMain(url: string): boolean {
  return process.argv[1] !== undefined && url.endsWith(process.argv[1].replace(/^.*\/examples\//, '/examples/'));
}

export { ARG, reorder };
