/**
 * Where driver arguments come from: the command line or batch files. Every token keeps its origin so
 * an error can name the file and line (benchdnn's `--batch=FILE`: `#` starts a comment, tokens are
 * whitespace-separated, nested files are found relative to the file that includes them).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Token {
  readonly text: string;
  /** Batch file the token was read from; undefined for the command line. */
  readonly file: string | undefined;
  /** 1-based line in `file`, or the 1-based position on the command line. */
  readonly line: number;
}

/** `FILE:LINE` or `command line argument N`, for messages. */
export function where(t: Token): string {
  return t.file === undefined ? `command line argument ${t.line}` : `${t.file}:${t.line}`;
}

/** An error in the input (unknown knob, bad value) that names where it was found. */
export class InputError extends Error {
  constructor(t: Token, message: string) {
    super(`${where(t)}: ${message}`);
    this.name = 'InputError';
  }
}

export function commandLineTokens(args: readonly string[]): Token[] {
  return args.map((text, i) => ({ text, file: undefined, line: i + 1 }));
}

/** Splits batch-file text into tokens; `#` to the end of the line is a comment. */
export function tokenizeBatch(text: string, file: string): Token[] {
  const out: Token[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const hash = raw.indexOf('#');
    const body = hash < 0 ? raw : raw.slice(0, hash);
    for (const w of body.split(/\s+/)) if (w) out.push({ text: w, file, line: i + 1 });
  });
  return out;
}

/** benchdnn's fallback directory for batch files (its `inputs/DRIVER/`): the driver's own inputs. */
const DEFAULT_INPUTS = fileURLToPath(new URL('./inputs/', import.meta.url));

/**
 * Resolves `--batch=NAME` met at `from`: relative to the including file's directory (the command
 * line: the working directory), then, as benchdnn does with its `inputs/matmul/`, in the driver's
 * own `bench/benchdnn/inputs/`. Reads and tokenizes it.
 */
export function readBatch(name: string, from: Token, cwd: string): Token[] {
  const base = from.file === undefined ? cwd : dirname(from.file);
  const candidates = isAbsolute(name) ? [name] : [resolve(base, name), resolve(DEFAULT_INPUTS, name)];
  const path = candidates.find((c) => existsSync(c));
  if (path === undefined) throw new InputError(from, `--batch: cannot find '${name}' (looked for ${candidates.join(', ')})`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new InputError(from, `--batch: cannot read '${path}' (${(e as Error).message.split('\n')[0]})`);
  }
  return tokenizeBatch(text, path);
}
