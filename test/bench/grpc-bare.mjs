// The gRPC baseline: a bare grpc-js server on the sidecar's own .proto files (proto-loader, as a
// typical ext_authz server is written), answering every Check with one fixed OK CheckResponse
// shaped like the sidecar's ALLOW (two request headers added, the same dynamic metadata).
// Prints "ready" once bound.
import { Server, ServerCredentials, loadPackageDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

const port = Number(process.argv[2]);
const dir = fileURLToPath(new URL('../../src/grpc/proto/', import.meta.url));
const def = loadSync(['envoy/service/auth/v3/external_auth.proto'], { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true, includeDirs: [dir] });
const pkg = loadPackageDefinition(def);
const header = (key, value) => ({ header: { key, value }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' });
const ok = {
  status: { code: 0, message: 'allow' },
  ok_response: { headers: [header('x-consent-valid-until', '1767225600000'), header('x-consent-decision-id', '00000000-0000-4000-8000-000000000000')] },
  dynamic_metadata: {
    fields: {
      decision: { string_value: 'ALLOW' },
      source: { string_value: 'cache' },
      validUntil: { number_value: 1767225600000 },
      decisionId: { string_value: '00000000-0000-4000-8000-000000000000' },
    },
  },
};
const server = new Server({ 'grpc.enable_channelz': 0 });
server.addService(pkg.envoy.service.auth.v3.Authorization.service, { Check: (_call, cb) => cb(null, ok) });
server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (err) => {
  if (err) throw err;
  process.stdout.write('ready\n');
});
process.on('SIGTERM', () => process.exit(0));
