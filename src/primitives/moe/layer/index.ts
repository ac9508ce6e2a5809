export { PrimitiveDesc, Primitive, type Stage, type StageName, type Workspace, type LayerArgs } from './layer.js';
export type { LayerConfig, LayerRouting, WeightScales } from './config.js';
