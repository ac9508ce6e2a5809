export * as routing from './routing/index.js';
export * as dispatch from './dispatch/index.js';
export * as combine from './combine/index.js';
export * as activation from './activation/index.js';
export * as layer from './layer/index.js';
export { ExpertParallelRank, type AllToAll, type ExpertParallelConfig } from './layer/expert_parallel.js';
