import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ServeProcess } from '../e2e/replicas.js';
import { until } from '../helpers/wait.js';

// A pod pays for what it runs: a plain serve never loads grpc-js; --grpc-listen does. A module
// resolve hook (node:module registerHooks, or register) reports every resolution of @grpc/grpc-js on stderr.

const dir = mkdtempSync(join(tmpdir(), 'grpc-lazy-'));
const hook = join(dir, 'hook.mjs');
writeFileSync(join(dir, 'hooks.mjs'), `export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (r.url.includes('/@grpc/grpc-js/')) process.stderr.write('RESOLVED @grpc/grpc-js\\n');
  return r;
}
`);
// In-thread hooks where Node has them (22.15, 24), so the report is written before the import returns.
writeFileSync(
  hook,
  `import * as m from 'node:module';
if (m.registerHooks) m.registerHooks({ resolve(specifier, context, next) {
  const r = next(specifier, context);
  if (r.url.includes('/@grpc/grpc-js/')) process.stderr.write('RESOLVED @grpc/grpc-js\\n');
  return r;
} });
else m.register('./hooks.mjs', import.meta.url);
`,
);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const flags = { 'upstream-url': 'http://127.0.0.1:9', 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0', 'redec-reconcile-interval-ms': '0' };

const RESOLVED = 'RESOLVED @grpc/grpc-js';

function serve(extra: Record<string, string>): ServeProcess {
  return new ServeProcess({ ...flags, ...extra }, { NODE_OPTIONS: `--import=${hook}` });
}

describe('grpc-js is loaded only with --grpc-listen', () => {
  it('serve --grpc-listen resolves @grpc/grpc-js (the hook works); a plain serve never does, up to its exit', async () => {
    const withGrpc = serve({ 'grpc-listen': '127.0.0.1:0' });
    await withGrpc.start();
    await until(() => withGrpc.logsText().includes(RESOLVED), 'grpc-js resolved');
    await withGrpc.stop();
    const plain = serve({});
    await plain.start();
    await plain.stop();
    // The import would have come before the listeners started, long before the exit.
    expect(plain.logsText()).toContain('"event":"stopped"');
    expect(plain.logsText()).not.toContain(RESOLVED);
  });
});
