export { PrimitiveDesc, type RoutingQuery } from './pd.js';
export { Primitive } from './primitive.js';
export type {
  RoutingOptions, RoutingProblem, RoutingScoring, GroupSelectMode, CustomRoutingFunction, CustomRoutingResult,
} from './problem.js';
export { BackwardPrimitiveDesc, type RoutingBackwardQuery } from './backward_pd.js';
export { BackwardPrimitive } from './backward_primitive.js';
