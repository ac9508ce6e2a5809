/**
 * The library's own JavaScript in a gpu MoE layer execution: the layer runs on a null WebGPU device
 * (bench/null_gpu_device.ts: every WebGPU call returns at once), so `execute` + `wait` time is ours,
 * not Dawn's. Per workload and variant: the median record time of the whole layer and of each stage,
 * and of the wait. Add `node --cpu-prof` (on an esbuild bundle, or `--import tsx`) to see where it goes.
 *
 *   npx tsx bench/gpu_host_js.ts --workloads=decode-1,decode-4,moe-b --variants=int4,f32 --reps=2000
 */
import { Engine, Memory, Stream, moe, type GpuEngine, type GpuMemory, type MemoryDesc, ARG, memory, dt, tag } from '../src/index.js';
import { nullGpuDevice } from './null_gpu_device.js';
import { gpuMoeWorkload } from './gpu_moe_bench.js';
import { layerPd, variantConfig, type GpuMoeVariant } from './gpu_bench_common.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** The layer's memories, unfilled: on the null device contents do not matter. */
function memories(eng: GpuEngine, pd: moe.layer.PrimitiveDesc<GpuEngine>, dims: { E: number; K: number; I: number }, v: GpuMoeVariant): Record<number, GpuMemory> {
  const mem = (md: MemoryDesc | undefined): GpuMemory => Memory.create(md!, eng);
  const args: Record<number, GpuMemory> = {
    [ARG.SRC]: mem(pd.queryMd('hidden')), [ARG.MOE_ROUTER_LOGITS]: mem(pd.queryMd('logits')),
    [ARG.WEIGHTS]: mem(pd.queryMd('w13')), [ARG.WEIGHTS_1]: mem(pd.queryMd('w2')), [ARG.DST]: mem(pd.queryMd('dst')),
  };
  const { scales } = variantConfig(v);
  for (const [id, d] of [[ARG.WEIGHTS, [dims.E, dims.K, 2 * dims.I]], [ARG.WEIGHTS_1, [dims.E, dims.I, dims.K]]] as const) {
    const sd = scales(d);
    if (sd) args[ARG.ATTR_SCALES | id] = mem(memory.desc(sd, dt.f32, sd.length === 3 ? tag.abc : tag.ab));
  }
  return args;
}

async function main(): Promise<void> {
  const cli = new Map<string, string>();
  for (const a of process.argv.slice(2)) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (m) cli.set(m[1], m[2] ?? 'true');
  }
  const workloads = (cli.get('workloads') ?? 'decode-1,decode-4,moe-b').split(',');
  const variants = (cli.get('variants') ?? 'int4,f32').split(',') as GpuMoeVariant[];
  const reps = Number(cli.get('reps') ?? 2000);
  const eng = await Engine.create({ kind: 'gpu', device: nullGpuDevice() });
  for (const name of workloads) {
    const w = gpuMoeWorkload(name);
    for (const v of variants) {
      const pd = layerPd(eng, w, v);
      const layer = new moe.layer.Primitive(pd);
      const args = memories(eng, pd, w, v);
      const strm = new Stream(eng);
      const rec: number[] = [], wait: number[] = [];
      const stage = new Map<string, number[]>();
      for (let r = 0; r < 2 * reps; r++) {
        const timedStages = r % 2 === 1;
        const t0 = performance.now();
        if (timedStages) {
          for (const s of layer.stages) {
            const a = performance.now();
            s.execute(strm, args);
            if (r >= reps) (stage.get(s.name) ?? stage.set(s.name, []).get(s.name)!).push(performance.now() - a);
          }
        } else {
          layer.execute(strm, args);
        }
        const t1 = performance.now();
        await strm.wait();
        if (r >= reps && !timedStages) {
          rec.push(t1 - t0);
          wait.push(performance.now() - t1);
        }
      }
      const us = (x: number[]): string => (median(x) * 1000).toFixed(1);
      console.log(`${name} ${v}: layer.execute ${us(rec)} us, wait ${us(wait)} us; stages ${[...stage].map(([n, x]) => `${n} ${us(x)}`).join(', ')}`);
      layer.destroy();
    }
  }
  eng.release();
}

await main();
