import { afterAll, describe, expect, it } from 'vitest';
import { ServeProcess } from '../helpers/serve-process.js';
import { BUNDLE_DIR, modulesLoaded, resolveHook } from '../helpers/resolve-hook.js';
import { until } from '../helpers/wait.js';

// A pod pays for what it runs: a plain serve never loads the gRPC listener or node:http2;
// --grpc-listen does. Neither loads grpc-js: the listener is ours, on node:http2. A module resolve
// hook (test/helpers/resolve-hook.ts) reports every file of the bundle (or of grpc-js, or a
// built-in) a process resolves on stderr, read back as the modules each holds.

const hook = resolveHook(['/@grpc/grpc-js/', 'node:http2', BUNDLE_DIR]);
afterAll(() => hook.remove());

const flags = { 'upstream-url': 'http://127.0.0.1:9', 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0', 'redec-reconcile-interval-ms': '0' };

const listenerLoaded = (output: string): boolean => modulesLoaded(output).some((m) => m.endsWith('/dist/grpc/listener.js'));
const grpcJsLoaded = (output: string): boolean => modulesLoaded(output).some((m) => m.includes('/@grpc/grpc-js/'));

function serve(extra: Record<string, string>): ServeProcess {
  return new ServeProcess({ ...flags, ...extra }, hook.env);
}

describe('the gRPC listener is loaded only with --grpc-listen', () => {
  it('serve --grpc-listen loads it (the hook works); a plain serve never does, nor node:http2, up to its exit; grpc-js neither', async () => {
    const withGrpc = serve({ 'grpc-listen': '127.0.0.1:0' });
    await withGrpc.start();
    await until(() => listenerLoaded(withGrpc.logsText()), 'the gRPC listener loaded');
    await withGrpc.stop();
    expect(modulesLoaded(withGrpc.logsText())).toContain('node:http2');
    expect(grpcJsLoaded(withGrpc.logsText())).toBe(false);
    const plain = serve({});
    await plain.start();
    await plain.stop();
    // The import would have come before the listeners started, long before the exit.
    expect(plain.logsText()).toContain('"event":"stopped"');
    expect(listenerLoaded(plain.logsText())).toBe(false);
    expect(modulesLoaded(plain.logsText())).not.toContain('node:http2');
    expect(grpcJsLoaded(plain.logsText())).toBe(false);
  });
});
