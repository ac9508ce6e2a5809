/** Int32 slots of the dispatch control block shared with the workers (see worker_main.js). */
export const CTRL = { GEN: 0, CMD: 1, JOB: 2, DONE: 3, ERR: 4, NWORKERS: 5, MSG: 16, MSG_BYTES: 192, INTS: 64 } as const;
export const CMD = { RUN: 1, EXIT: 2, THROW: 3, DIE: 4 } as const;
