/**
 * A minimal describe / it / expect for the gpu suites. They run in a plain Node process
 * (test/gpu/run_suite.ts, spawned by test/gpu.test.ts), not in a vitest worker: Dawn on SwiftShader
 * crashed (futex errors, segfaults) whenever kernels ran inside vitest's fork and thread workers,
 * never in plain Node. Same assertions, same failure messages; vitest reports one test per case.
 */
export interface Case {
  readonly name: string;
  readonly fn: () => Promise<void> | void;
}

const cases: Case[] = [];
const prefix: string[] = [];
const hooks = { beforeAll: [] as (() => Promise<void> | void)[], afterAll: [] as (() => Promise<void> | void)[] };

export function describe(name: string, body: () => void): void {
  prefix.push(name);
  try {
    body();
  } finally {
    prefix.pop();
  }
}

export function it(name: string, fn: () => Promise<void> | void): void {
  cases.push({ name: [...prefix, name].join(' > '), fn });
}

export function beforeAll(fn: () => Promise<void> | void): void {
  hooks.beforeAll.push(fn);
}

export function afterAll(fn: () => Promise<void> | void): void {
  hooks.afterAll.push(fn);
}

export function registered(): { cases: readonly Case[]; hooks: typeof hooks } {
  return { cases, hooks };
}

function show(x: unknown): string {
  return typeof x === 'string' ? JSON.stringify(x) : x instanceof Error ? `${x.name}: ${x.message}` : String(x);
}

function fail(msg: string): never {
  throw new Error(msg);
}

export function expect(actual: unknown): {
  toBe(v: unknown): void;
  toMatch(re: RegExp): void;
  toBeInstanceOf(c: abstract new (...a: never[]) => unknown): void;
  toBeUndefined(): void;
  toThrow(re?: RegExp): void;
} {
  return {
    toBe: (v) => { if (!Object.is(actual, v)) fail(`expected ${show(actual)} to be ${show(v)}`); },
    toMatch: (re) => { if (typeof actual !== 'string' || !re.test(actual)) fail(`expected ${show(actual)} to match ${re}`); },
    toBeInstanceOf: (c) => { if (!(actual instanceof c)) fail(`expected ${show(actual)} to be an instance of ${c.name}`); },
    toBeUndefined: () => { if (actual !== undefined) fail(`expected ${show(actual)} to be undefined`); },
    toThrow: (re) => {
      if (typeof actual !== 'function') fail('toThrow needs a function');
      try {
        (actual as () => unknown)();
      } catch (e) {
        const m = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        if (re && !re.test(m) && !(e instanceof Error && re.test(e.message))) fail(`expected the error ${show(m)} to match ${re}`);
        return;
      }
      fail('expected the function to throw');
    },
  };
}
