export { PrimitiveDesc, type RoutingQuery } from './pd.js';
export { Primitive } from './primitive.js';
export type {
  RoutingOptions, RoutingProblem, RoutingScoring, GroupSelectMode, CustomRoutingFunction, CustomRoutingResult,
} from './problem.js';
