/**
 * ORT-web's logger writes to stdout / stderr: through `fs.writeSync(fd)` in its separate emscripten glue
 * (tsx runs), through console in its bundled glue (the esbuild bundle). While `captureOutput` runs, both
 * are kept instead of printed; the lines then tell where ORT placed each node and which WebGPU programs ran.
 */
import fs from 'node:fs';

export async function captureOutput<T>(fn: () => Promise<T>): Promise<{ value: T; text: string }> {
  const chunks: string[] = [];
  const out = process.stdout.write, err = process.stderr.write;
  const keep = (chunk: unknown, ...rest: unknown[]): boolean => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
    const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    cb?.();
    return true;
  };
  const writeSync = fs.writeSync;
  const keepSync = (fd: number, data: unknown, ...rest: unknown[]): number => {
    if (fd !== 1 && fd !== 2) return (writeSync as (...a: unknown[]) => number)(fd, data, ...rest);
    const text = typeof data === 'string' ? data : Buffer.from(data as Uint8Array).toString('utf8');
    chunks.push(text);
    return typeof data === 'string' ? Buffer.byteLength(text) : (data as Uint8Array).byteLength;
  };
  process.stdout.write = keep as typeof process.stdout.write;
  process.stderr.write = keep as typeof process.stderr.write;
  fs.writeSync = keepSync as typeof fs.writeSync;
  try {
    const value = await fn();
    return { value, text: chunks.join('') };
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
    fs.writeSync = writeSync;
  }
}

/** `Node placements` block of session initialization: the EP of each node ('All nodes placed on [X]' or per EP). */
export function parsePlacements(log: string): string[] {
  return [...log.matchAll(/(?:All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)/g)].map((m) => `${m[1]}: ${m[2]} node(s)`);
}

/** WebGPU programs the EP started (names without their cache keys), with how many times each ran. */
export function parsePrograms(log: string): Map<string, number> {
  const programs = new Map<string, number>();
  for (const m of log.matchAll(/Starting program "([A-Za-z0-9_]+)/g)) programs.set(m[1], (programs.get(m[1]) ?? 0) + 1);
  return programs;
}
