export { PrimitiveDesc, type P3DataQuery } from './data_pd.js';
export { Primitive } from './data_primitive.js';
