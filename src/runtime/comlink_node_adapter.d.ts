// comlink ships node-adapter.d.ts next to node-adapter.mjs, which TypeScript does not pair up.
declare module 'comlink/dist/esm/node-adapter.mjs' {
  import type { Endpoint } from 'comlink';
  interface NodeEndpoint {
    postMessage(message: unknown, transfer?: unknown[]): void;
    on(type: string, listener: (value: unknown) => void): void;
    off(type: string, listener: (value: unknown) => void): void;
    start?: () => void;
  }
  export default function nodeEndpoint(nep: NodeEndpoint): Endpoint;
}
