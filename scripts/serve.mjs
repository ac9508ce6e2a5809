// A tiny static server for the browser demo and tests: serves the project folder with the headers that
// make a page cross-origin isolated (COOP same-origin + COEP require-corp), so SharedArrayBuffer, shared
// wasm memory and worker threads are available. `npm run serve` (PORT=8080 by default); importable as
// `startServer(port)` by the browser tests. `/broken-dist/*` serves dist/ with a worker that fails to
// load (tests): its embedded source (rollup.config.mjs, embedWorker) replaced by a throw.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json', '.map': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png', '.svg': 'image/svg+xml', '.css': 'text/css',
};

export function startServer(port = 0, { isolated = true, dir = root } = {}) {
  const server = createServer(async (req, res) => {
    try {
      let path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      const broken = path.startsWith('/broken-dist/');
      if (broken) path = '/dist/' + path.slice('/broken-dist/'.length);
      if (path.endsWith('/')) path += 'index.html';
      const file = normalize(join(dir, path));
      if (!file.startsWith(dir)) throw Object.assign(new Error('outside'), { code: 'ENOENT' });
      if (!(await stat(file)).isFile()) throw Object.assign(new Error('dir'), { code: 'ENOENT' });
      let body = await readFile(file);
      if (broken && path === '/dist/index.js') {
        const text = body.toString('utf8');
        const worker = /\/\* groupdnn:worker_main\.js \*\/ "(?:[^"\\]|\\.)*"/;
        if (!worker.test(text)) throw new Error('broken-dist: no embedded worker in dist/index.js');
        body = text.replace(worker, '"throw new Error(\'this worker fails to load (broken-dist)\');"');
      }
      const headers = { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream', 'Cache-Control': 'no-store', 'Cross-Origin-Resource-Policy': 'same-origin' };
      if (isolated) Object.assign(headers, { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' });
      res.writeHead(200, headers);
      res.end(body);
    } catch (e) {
      res.writeHead(e && e.code === 'ENOENT' ? 404 : 500, { 'Content-Type': 'text/plain' });
      res.end(String(e && e.message));
    }
  });
  return new Promise((resolvePort) => server.listen(port, '127.0.0.1', () => resolvePort({ server, port: server.address().port })));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  const { port } = await startServer(Number(process.env.PORT ?? 8080));
  console.log(`serving ${root} on http://127.0.0.1:${port}/ (cross-origin isolated); demo: http://127.0.0.1:${port}/examples/browser/`);
}
