export * as routing from './routing/index.js';
