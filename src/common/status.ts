/** oneDNN status codes that a groupdnn call can report. */
export const Status = {
  success: 'success',
  out_of_memory: 'out_of_memory',
  invalid_arguments: 'invalid_arguments',
  unimplemented: 'unimplemented',
  runtime_error: 'runtime_error',
} as const;
export type Status = (typeof Status)[keyof typeof Status];

/** The one error type of the library: a oneDNN status plus a message naming the argument and the rule. */
export class DnnlError extends Error {
  readonly status: Exclude<Status, 'success'>;
  constructor(status: Exclude<Status, 'success'>, message: string) {
    super(`${status}: ${message}`);
    this.name = 'DnnlError';
    this.status = status;
  }
}

/** Throws `invalid_arguments` with `message` unless `cond` holds. Keeps guard lists one rule per line. */
export function check(cond: boolean, message: string): asserts cond {
  if (!cond) throw new DnnlError('invalid_arguments', message);
}

/** Throws `unimplemented` with `message` unless `cond` holds. */
export function checkImpl(cond: boolean, message: string): asserts cond {
  if (!cond) throw new DnnlError('unimplemented', message);
}
