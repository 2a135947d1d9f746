import { afterAll, describe, expect, it } from 'vitest';
import { ServeProcess } from '../helpers/serve-process.js';
import { BUNDLE_DIR, modulesLoaded, resolveHook } from '../helpers/resolve-hook.js';
import { until } from '../helpers/wait.js';

// A pod pays for what it runs: a plain serve never loads grpc-js; --grpc-listen does. A module
// resolve hook (test/helpers/resolve-hook.ts) reports every file of the bundle (or of grpc-js) a
// process resolves on stderr, read back as the modules each holds.

const hook = resolveHook(['/@grpc/grpc-js/', BUNDLE_DIR]);
afterAll(() => hook.remove());

const flags = { 'upstream-url': 'http://127.0.0.1:9', 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0', 'redec-reconcile-interval-ms': '0' };

const grpcLoaded = (output: string): boolean => modulesLoaded(output).some((m) => m.includes('/@grpc/grpc-js/'));

function serve(extra: Record<string, string>): ServeProcess {
  return new ServeProcess({ ...flags, ...extra }, hook.env);
}

describe('grpc-js is loaded only with --grpc-listen', () => {
  it('serve --grpc-listen resolves @grpc/grpc-js (the hook works); a plain serve never does, up to its exit', async () => {
    const withGrpc = serve({ 'grpc-listen': '127.0.0.1:0' });
    await withGrpc.start();
    await until(() => grpcLoaded(withGrpc.logsText()), 'grpc-js resolved');
    await withGrpc.stop();
    const plain = serve({});
    await plain.start();
    await plain.stop();
    // The import would have come before the listeners started, long before the exit.
    expect(plain.logsText()).toContain('"event":"stopped"');
    expect(grpcLoaded(plain.logsText())).toBe(false);
  });
});
