/**
 * oneDNN-like verbose log: `GROUPDNN_VERBOSE=1` (or `setVerbose(1)`) prints one line per primitive
 * creation and per execution, with descriptors and wall time in milliseconds.
 */
type Sink = (line: string) => void;

function envLevel(): number {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const v = env?.GROUPDNN_VERBOSE ?? env?.ONEDNN_VERBOSE;
  const n = v === undefined ? 0 : Number.parseInt(v, 10);
  return Number.isFinite(n) ? n : 0;
}

let level = envLevel();
let sink: Sink = (line) => console.log(line);

/** Sets the verbose level (0 = off, 1 = creation and execution lines). Returns the previous level. */
export function setVerbose(newLevel: number): number {
  const prev = level;
  level = newLevel;
  return prev;
}

export function getVerbose(): number {
  return level;
}

/** Redirects verbose lines (default: console.log). Returns the previous sink. */
export function setVerboseSink(fn: Sink): Sink {
  const prev = sink;
  sink = fn;
  return prev;
}

export function verboseLine(kind: 'create' | 'exec', fields: string[]): void {
  if (level < 1) return;
  sink(['groupdnn_verbose', 'primitive', kind === 'create' ? 'create:cache_miss' : 'exec', 'cpu', ...fields].join(','));
}

export function now(): number {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}
