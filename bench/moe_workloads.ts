/** Whole-layer MoE workloads of `npm run bench -- --mode=moe` (and the ORT MoE peer). */
export interface MoeWorkload {
  readonly name: string;
  readonly T: number;
  readonly E: number;
  readonly k: number;
  readonly K: number;
  readonly I: number;
  readonly description: string;
}

export const MOE_WORKLOADS: Readonly<Record<string, MoeWorkload>> = {
  'moe-b': { name: 'moe-b', T: 256, E: 64, k: 6, K: 2048, I: 1408, description: 'MoE-B layer: T=256 E=64 top-6 K=2048 I=1408' },
  mixtral: { name: 'mixtral', T: 256, E: 8, k: 2, K: 4096, I: 3584, description: 'Mixtral-like layer scaled to fit: T=256 E=8 top-2 K=4096 I=3584 (14336/4)' },
  'decode-1': { name: 'decode-1', T: 1, E: 64, k: 6, K: 2048, I: 1408, description: 'decode T=1 on MoE-B' },
  'decode-4': { name: 'decode-4', T: 4, E: 64, k: 6, K: 2048, I: 1408, description: 'decode T=4 on MoE-B' },
  'decode-8': { name: 'decode-8', T: 8, E: 64, k: 6, K: 2048, I: 1408, description: 'decode T=8 on MoE-B' },
};

/** Deterministic inputs shared by groupdnn and the peers (same seeds, same layouts). */
export const MOE_SEEDS = { hidden: 101, logits: 102, w13: 103, w2: 104 } as const;
/** Weight scale so activations stay O(1) through the layer. */
export const MOE_WEIGHT_SCALE = 0.05;

/** Useful flops of a layer: 2 GEMMs per routed row. */
export function moeFlops(w: MoeWorkload): number {
  return 2 * w.T * w.k * (w.K * 2 * w.I + w.I * w.K);
}
