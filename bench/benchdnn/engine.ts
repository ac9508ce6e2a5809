/** Engine selection: the one place the driver turns `--engine` / `--ctx-exe` into a groupdnn engine. */
import { DnnlError, Engine } from '../../src/index.js';

export type EngineKind = 'cpu' | 'gpu';

export async function createEngine(kind: EngineKind, threads: number | undefined): Promise<Engine> {
  if (kind === 'gpu') {
    throw new DnnlError('unimplemented', "--engine=gpu: the driver does not create groupdnn's gpu engine yet (cpu only)");
  }
  return Engine.create(threads === undefined ? {} : { threads });
}
