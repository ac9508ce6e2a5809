export { PrimitiveDesc, Primitive, type Stage, type StageName, type Workspace, type LayerArgs } from './layer.js';
export { BackwardPrimitiveDesc, BackwardPrimitive, type BackwardStageName, type BackwardWorkspace } from './backward.js';
export type { LayerConfig, LayerRouting, WeightScales } from './config.js';
