import type { GpuEngine } from '../src/index.js';

/**
 * Keeps the GPU busy for `ms` milliseconds with an arithmetic-only kernel, so that the timing that follows
 * runs at the clocks of sustained work. Why: on the H200 the device tool lends, the SM clock falls to
 * 345-660 MHz within a second of idling (a host-side weights upload is enough) and short bursts of work
 * with host gaps between them (a T = 256 GEMM of ~1 ms, waited for each time) do not bring it back: the
 * same MoE-B P#1 GEMM measured 0.87 ms right after sustained work and 3.2-4.5 ms after an upload
 * (nvidia-smi trace and runs in reports/gpu-vec4-h200-s8.txt). Benchmarks report the sustained clock.
 */
export async function keepGpuBusy(eng: GpuEngine, ms: number): Promise<void> {
  if (ms <= 0) return;
  const p = eng.pipeline('bench-clock-warmup', () => `@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3u) {
  var x = f32(g.x) * 1e-7;
  for (var i = 0u; i < 2000u; i++) { x = fma(x, 0.999999, 1e-7); }
  if (x == 1.2345e-30) { o[g.x % 256u] = x; }
}`);
  const buf = eng.createBuffer(1024, 'clock warm-up');
  const bg = eng.device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
  // The grid doubles until one submit takes ~2 ms, so a CPU adapter (SwiftShader) is not held for minutes.
  let groups = 1;
  for (const t0 = performance.now(); performance.now() - t0 < ms;) {
    const t1 = performance.now();
    const enc = eng.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(p);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(groups);
    pass.end();
    eng.device.queue.submit([enc.finish()]);
    await eng.device.queue.onSubmittedWorkDone();
    if (performance.now() - t1 < 2 && groups < 65535) groups = Math.min(65535, groups * 2);
  }
  buf.destroy();
}
