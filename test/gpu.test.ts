import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * The gpu engine's suites (test/gpu/*.suite.ts) on Dawn + SwiftShader, each in plain Node processes
 * (test/gpu/harness.ts says why). SwiftShader under dawn.node still aborts a process now and then
 * or hangs (futex / std::system_error inside its worker threads, seen on this 2-core machine): each
 * case runs in a fresh process, rerun (at most twice) only when the process died or hung without
 * reporting. A case that reports a failure is never rerun.
 */
const SUITES = ['test/gpu/matmul.suite.ts'];
const ICD = process.env.VK_ICD_FILENAMES ?? '/usr/lib/chromium/vk_swiftshader_icd.json';

interface Result { index: number; name: string; ok: boolean; error?: string }

/** Runs the suite's cases [args] in a child process (asynchronously: vitest's worker must keep answering). */
function node(suite: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, ['--import', 'tsx', 'test/gpu/run_suite.ts', suite, ...args], { env: { ...process.env, VK_ICD_FILENAMES: ICD } });
    let stdout = '', stderr = '';
    c.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
    c.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    const timer = setTimeout(() => c.kill('SIGKILL'), 60_000);
    c.on('close', () => {
      clearTimeout(timer);
      resolve({ stdout, stderr });
    });
  });
}

async function run(suite: string, args: string[]): Promise<{ results: Result[]; done: boolean; stderr: string }> {
  const r = await node(suite, args);
  const parsed = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Result & { done?: boolean });
  return { results: parsed.filter((x) => !x.done), done: parsed.some((x) => x.done), stderr: r.stderr.slice(-2000) };
}

async function runSuite(suite: string): Promise<Map<string, Result>> {
  const names = JSON.parse((await node(suite, ['--list'])).stdout.trim()) as string[];
  const out = new Map<string, Result>();
  // One process per case: a SwiftShader abort or hang then costs one case a retry, not the suite.
  for (let i = 0; i < names.length; i++) {
    let last: { results: Result[]; stderr: string } | undefined;
    for (let attempt = 0; attempt < 3; attempt++) {
      last = await run(suite, [String(i), String(i + 1)]);
      if (last.results.length) break;
    }
    out.set(names[i], last?.results[0] ?? { index: i, name: names[i], ok: false, error: `the process died three times in this case: ${last?.stderr ?? ''}` });
  }
  return out;
}

describe('gpu engine on SwiftShader (Dawn)', () => {
  it('has the SwiftShader Vulkan driver (or VK_ICD_FILENAMES set): the gpu tests never skip', () => {
    expect(existsSync(ICD), `no Vulkan ICD at ${ICD}: install Debian's chromium (.ci/run does) or set VK_ICD_FILENAMES`).toBe(true);
  });
  for (const suite of SUITES) {
    it(suite, async () => {
      const res = await runSuite(suite);
      const failed = [...res.values()].filter((r) => !r.ok);
      expect(res.size).toBeGreaterThan(0);
      expect(failed.map((f) => `${f.name}: ${f.error}`)).toEqual([]);
    }, 600_000);
  }
});
