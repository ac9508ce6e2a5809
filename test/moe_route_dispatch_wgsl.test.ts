/**
 * The fused route + dispatch kernel (moe_route_dispatch.ts) holds the routing kernel's WGSL and the
 * dispatch's in one module: their module-scope declarations must not share a name (WGSL rejects a
 * redeclaration; a name both parts use for different things would otherwise be one of them). The
 * routing part is generated with ROUTE_NAMES; a name the dispatch part also declares is caught here.
 */
import { describe, expect, it } from 'vitest';
import { ROUTE_NAMES, routeDispatchParts, routeDispatchWgsl } from '../src/kernels/wgsl/moe_route_dispatch.js';
import type { RoutingKernelConfig } from '../src/kernels/wgsl/moe_routing.js';
import { WGSL_VMATH } from '../src/kernels/wgsl/wgsl_vmath.js';

/** The names a WGSL module declares at module scope (fn, var, struct, const, override, alias), in order, repeats kept. */
function moduleDeclarations(wgsl: string): string[] {
  let s = wgsl.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/[^\n]*/g, ' ');
  // Drop every brace block, innermost first: what is left is module scope (struct and fn bodies gone).
  for (let prev = ''; prev !== s;) { prev = s; s = s.replace(/\{[^{}]*\}/g, ' '); }
  return [...s.matchAll(/\b(?:fn|var|struct|const|override|alias)\b(?:\s*<[^>]*>)?\s+([A-Za-z_]\w*)/g)].map((m) => m[1]);
}

const base: RoutingKernelConfig = { E: 64, k: 6, groups: 1, kgroup: 1, gmode: 0, softmax: true, renorm: true, dt: 'f32', bias: false, scratch: false };
const configs: [string, RoutingKernelConfig, number, number][] = [
  ['MoE-B softmax, ng 1, G 64', base, 1, 64],
  ['sigmoid + bias, bf16, ng 8, G 16', { ...base, softmax: false, bias: true, dt: 'bf16' }, 8, 16],
  ['grouped top-k (max + second), bias, ng 4, G 1', { ...base, E: 256, k: 8, groups: 8, kgroup: 4, gmode: 1, bias: true }, 4, 1],
  ['E = 1, f16, ng 2, G 1', { ...base, E: 1, k: 1, dt: 'f16', renorm: false }, 2, 1],
];

describe('moduleDeclarations', () => {
  it('finds module-scope names only, with their repeats', () => {
    const wgsl = `struct S { a: u32 }\n@group(0) @binding(3) var<storage, read_write> buf: array<u32>;\nvar<workgroup> w: array<f32, 4>;
const C = 1u; override O: u32 = 2u; // fn commented() {}\n/* var hidden: u32; */
fn f(x: u32) -> u32 { var local = x; if (x > 0u) { let y = 1u; } return local; }\nfn C2() {}\nconst C = 2u;`;
    expect(moduleDeclarations(wgsl)).toEqual(['S', 'buf', 'w', 'C', 'O', 'f', 'C2', 'C']);
  });
});

describe('fused route + dispatch WGSL', () => {
  for (const [name, c, ng, G] of configs) {
    it(`declares no name in both the routing and the dispatch part: ${name}`, () => {
      const { route, dispatch } = routeDispatchParts(c, ng, G);
      const r = moduleDeclarations(route), d = moduleDeclarations(dispatch);
      // The parts are what they should be: the routing's and the dispatch's declarations.
      expect(r).toEqual(expect.arrayContaining(['RouteParams', 'RP', 'route_ids', 'route_status', 'route_report', 'route_token', 'route_all']));
      expect(d).toEqual(expect.arrayContaining(['Params', 'P', 'ids', 'status', 'report', 'dispatch_one']));
      expect(r.filter((x) => d.includes(x))).toEqual([]);
      // And the whole module (with the shared math) declares every name once.
      const all = moduleDeclarations(routeDispatchWgsl(c, ng, G));
      expect(all.filter((x, i) => all.indexOf(x) !== i)).toEqual([]);
      expect(all.length).toBe(r.length + d.length + moduleDeclarations(WGSL_VMATH).length + 1);
    });
  }

  it('catches a routing name the dispatch part declares too', () => {
    const [, c, ng, G] = configs[1];
    const { route, dispatch } = routeDispatchParts(c, ng, G, { ...ROUTE_NAMES, status: 'status', report: 'report' });
    const d = moduleDeclarations(dispatch);
    expect(moduleDeclarations(route).filter((x) => d.includes(x))).toEqual(['status', 'report']);
  });
});
