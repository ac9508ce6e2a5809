/**
 * One onnxruntime-web MoE / QMoE measurement in its own process (ORT fixes its thread count per process):
 *   npx tsx bench/ort_moe_peer_cli.ts --workload=moe-b --threads=2 --variant=moe-f32 --min-ms=1500
 * Weights, hidden states and router logits come from the seeds groupdnn's bench uses. Prints one JSON line.
 */
import { cpuUsage } from 'node:process';
import { createOrtMoePeer, type OrtMoeVariant } from './ort_moe_peer.js';
import { fillRandom, timeIt } from './timing.js';
import { MOE_SEEDS, MOE_WEIGHT_SCALE, MOE_WORKLOADS } from './moe_workloads.js';

const args = new Map(process.argv.slice(2).map((a) => {
  const [k, v] = a.replace(/^--/, '').split('=');
  return [k, v ?? 'true'] as const;
}));
const w = MOE_WORKLOADS[args.get('workload') ?? 'moe-b'];
if (!w) throw new Error(`unknown workload ${args.get('workload')}`);
const threads = Number(args.get('threads') ?? 1);
const variant = (args.get('variant') ?? 'moe-f32') as OrtMoeVariant;
const minMs = Number(args.get('min-ms') ?? 1500);
const w13 = new Float32Array(w.E * w.K * 2 * w.I), w2 = new Float32Array(w.E * w.I * w.K);
fillRandom(w13, MOE_SEEDS.w13, MOE_WEIGHT_SCALE);
fillRandom(w2, MOE_SEEDS.w2, MOE_WEIGHT_SCALE);
const hidden = new Float32Array(w.T * w.K), logits = new Float32Array(w.T * w.E), out = new Float32Array(w.T * w.K);
fillRandom(hidden, MOE_SEEDS.hidden);
fillRandom(logits, MOE_SEEDS.logits, 4);
const peer = await createOrtMoePeer(w, variant, w13, w2, threads);
const c0 = cpuUsage();
const w0 = performance.now();
const t = await timeIt(() => peer.run(hidden, logits, out), { minMs, minRuns: 5 });
const c1 = cpuUsage(c0);
await peer.close();
let sum = 0;
for (const v of out) sum += v;
console.log(JSON.stringify({ medianMs: t.median, minMs: t.min, maxMs: t.max, runs: t.runs, note: `cpu/wall=${((c1.user + c1.system) / 1000 / (performance.now() - w0)).toFixed(2)} checksum=${sum.toExponential(4)}` }));
