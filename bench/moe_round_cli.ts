/**
 * One round of groupdnn's MoE-layer measurements in its own process (each round maps gigabytes of
 * wasm heap that only process exit reliably returns), printing one JSON row per line:
 *   npx tsx bench/moe_round_cli.ts --workload=moe-b --threads=1 --isa=relaxed --min-ms=1500
 */
import { moeRound } from './moe_bench.js';
import { MOE_WORKLOADS } from './moe_workloads.js';

const args = new Map(process.argv.slice(2).map((a) => {
  const [k, v] = a.replace(/^--/, '').split('=');
  return [k, v ?? 'true'] as const;
}));
const w = MOE_WORKLOADS[args.get('workload') ?? 'moe-b'];
if (!w) throw new Error(`unknown workload ${args.get('workload')}`);
const rows = await moeRound(w, Number(args.get('threads') ?? 1), (args.get('isa') ?? 'auto') as 'auto' | 'simd128' | 'relaxed', Number(args.get('min-ms') ?? 1500));
for (const r of rows) console.log(JSON.stringify(r));
