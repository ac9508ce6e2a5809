/**
 * What a queue.submit costs the host through Dawn, by command count and bindings per dispatch (issue 21's
 * decode walls are host time): raw WebGPU on the engine's device, no library code in the loop. Per config
 * the medians of --reps of: recording (encoder, pass, D x (setPipeline, setBindGroup, dispatch), finish),
 * submit, and the wait (onSubmittedWorkDone), plus the same with a validation error scope around it.
 *
 *   npx tsx bench/dawn_submit_probe.ts --reps=300
 */
import { Engine } from '../src/index.js';

/** JavaScript between two Dawn calls, as a primitive's execute runs it: objects, maps, a walk over ~1 MiB. */
const heap = new Float64Array(1 << 17);
let sink = 0;
function busy(): number {
  const objs: { a: number; b: string }[] = [];
  for (let i = 0; i < 40; i++) objs.push({ a: i, b: `k${i}` });
  let s = objs.length;
  for (let i = (sink & 7); i < heap.length; i += 64) s += heap[i];
  return s;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main(): Promise<void> {
  const reps = Number(/--reps=(\d+)/.exec(process.argv.join(' '))?.[1] ?? 300);
  const eng = await Engine.create({ kind: 'gpu' });
  const dev = eng.device;
  console.log(`gpu: ${eng.adapterInfo}`);
  // --mib: size of each bound buffer; --distinct: every dispatch binds buffers of its own (7 x 8 buffers).
  const mib = Number(/--mib=(\d+)/.exec(process.argv.join(' '))?.[1] ?? 1);
  const distinct = process.argv.includes('--distinct');
  const buffers = Array.from({ length: distinct ? 56 : 8 }, () => dev.createBuffer({ size: mib << 20, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST }));
  console.log(`${buffers.length} buffers of ${mib} MiB`);
  const read = dev.createBuffer({ size: 256, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const pipelineOf = (b: number): GPUComputePipeline => {
    const decl = Array.from({ length: b }, (_, i) => `@group(0) @binding(${i}) var<storage, read_write> b${i}: array<u32>;`).join('\n');
    const body = Array.from({ length: b }, (_, i) => `b${i}[gid.x] += 1u;`).join(' ');
    const module = dev.createShaderModule({ code: `${decl}\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3u) { ${body} }` });
    return dev.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  };
  for (const B of [1, 8]) {
    const pipes = Array.from({ length: 7 }, () => pipelineOf(B));
    const groups = pipes.map((p, d) => dev.createBindGroup({ layout: p.getBindGroupLayout(0), entries: Array.from({ length: B }, (_, i) => ({ binding: i, resource: { buffer: buffers[distinct ? d * 8 + i : i] } })) }));
    for (const D of (process.argv.includes('--d7') ? [7] : [1, 3, 5, 7])) {
      for (const mode of ['plain', 'scope+readback', 'churn', 'churn-only']) {
        const rec: number[] = [], sub: number[] = [], wait: number[] = [], all: number[] = [];
        for (let r = 0; r < reps + 30; r++) {
          const churn = mode.startsWith('churn');
          if (mode === 'churn-only') {
            const t0 = performance.now();
            for (let d = 0; d < 3 * D + 3; d++) sink += busy();
            const t1 = performance.now();
            if (r >= 30) all.push(t1 - t0);
            continue;
          }
          const t0 = performance.now();
          if (churn) sink += busy();
          if (mode === 'scope+readback') dev.pushErrorScope('validation');
          const enc = dev.createCommandEncoder();
          const pass = enc.beginComputePass();
          for (let d = 0; d < D; d++) {
            if (churn) sink += busy();
            pass.setPipeline(pipes[d]);
            if (churn) sink += busy();
            pass.setBindGroup(0, groups[d]);
            if (churn) sink += busy();
            pass.dispatchWorkgroups(1);
          }
          pass.end();
          if (mode === 'scope+readback') enc.copyBufferToBuffer(buffers[0], 0, read, 0, 16);
          if (churn) sink += busy();
          const cb = enc.finish();
          const t1 = performance.now();
          dev.queue.submit([cb]);
          const t2 = performance.now();
          if (mode === 'scope+readback') void dev.popErrorScope();
          if (mode === 'scope+readback') {
            await read.mapAsync(GPUMapMode.READ, 0, 16);
            read.getMappedRange(0, 16);
            read.unmap();
          } else {
            await dev.queue.onSubmittedWorkDone();
          }
          const t3 = performance.now();
          if (r >= 30) {
            rec.push(t1 - t0); sub.push(t2 - t1); wait.push(t3 - t2); all.push(t3 - t0);
          }
        }
        const us = (x: number[]): string => (median(x) * 1000).toFixed(1);
        if (mode === 'churn-only') {
          console.log(`bindings ${B} dispatches ${D} ${mode}: the JS between the calls alone ${us(all)} us`);
          continue;
        }
        console.log(`bindings ${B} dispatches ${D} ${mode}: record ${us(rec)} us, submit ${us(sub)} us, wait ${us(wait)} us, all ${us(all)} us`);
      }
    }
  }
  eng.release();
  if (sink === -1) console.log(sink);
}

await main();
