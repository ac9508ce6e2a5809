/**
 * The benchdnn driver as an installed package's bin (issue 17): `npm pack` lists dist/benchdnn.js,
 * and `groupdnn-benchdnn` from an install of the tarball runs a problem file against the installed
 * build and exits with benchdnn's status.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve('.');
const dir = mkdtempSync(join(tmpdir(), 'groupdnn-benchdnn-'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

beforeAll(() => {
  expect(existsSync('dist/benchdnn.js'), 'dist/ is missing: npm test builds it').toBe(true);
  // --ignore-scripts: `prepare` would rebuild dist/ (rm -rf first) under the other package tests running
  // beside this file; npm test has just built it.
  execFileSync(npm, ['pack', '--silent', '--ignore-scripts', '--pack-destination', dir], { cwd: root, stdio: 'pipe' });
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--offline', `./${tgz}`], { cwd: dir, stdio: 'pipe' });
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('groupdnn-benchdnn bin', () => {
  it('is in the package with a node shebang', () => {
    const listing = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const files = (JSON.parse(listing) as { files: { path: string }[] }[])[0].files.map((f) => f.path);
    expect(files).toContain('dist/benchdnn.js');
    expect(readFileSync(join(root, 'dist/benchdnn.js'), 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
  });

  it('runs a batch file from an installed package and reports like benchdnn', () => {
    writeFileSync(join(dir, 'problems'), '--reset\n--dt=f32,bf16:bf16:f32 # two states\n--grouped=0:3:2+0+5\n7x16:3x16x8\n');
    const bin = join(dir, 'node_modules/.bin/groupdnn-benchdnn');
    const ok = spawnSync(bin, ['--ctx-exe=1', '--matmul', '--batch=problems'], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    expect(ok.stderr).toBe('');
    expect(ok.stdout.trim().split('\n')).toEqual([
      '0:PASSED __REPRO: --matmul --grouped=0:3:2+0+5 7x16:3x16x8',
      '1:PASSED __REPRO: --matmul --dt=bf16:bf16:f32 --grouped=0:3:2+0+5 7x16:3x16x8',
      'tests:2 passed:2 skipped:0 mistrusted:0 unimplemented:0 invalid_arguments:0 failed:0 listed:0',
    ]);
    expect(ok.status).toBe(0);
    const bad = spawnSync(bin, ['--matmul', '--eltwise-typo=1'], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("command line argument 2: unknown option '--eltwise-typo'");
  }, 60_000);
});
