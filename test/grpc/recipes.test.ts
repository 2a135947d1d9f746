import { AuthorizationPolicy } from '@kubernetes-models/istio/security.istio.io/v1/AuthorizationPolicy';
import { ServiceEntry } from '@kubernetes-models/istio/networking.istio.io/v1/ServiceEntry';
import { VirtualService } from '@kubernetes-models/istio/networking.istio.io/v1/VirtualService';
import { EnvoyFilter } from '@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter';
import { Service } from 'kubernetes-models/v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_FORWARD_AUTH_USER_HEADER, DEFAULT_UPSTREAM_TIMEOUT_MS } from '../../src/config/index.js';
import { docText } from '../helpers/docs.js';
import { GrpcClient, headersOf } from '../helpers/grpc.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { parseYamlStream } from '../helpers/helm.js';

// The recipes of docs/ext-authz-grpc.md, as written there: parsed, their fields checked against
// what the sidecar and its chart expect, Kubernetes objects validated with kubernetes-models where
// a model exists, and Envoy's routes asked of a real sidecar the way Envoy would ask.

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const CHART_GRPC_PORT = 7703;
let recipes: Map<string, Obj[]>;

beforeAll(async () => {
  recipes = new Map();
  const page = docText('ext-authz-grpc.md');
  for (const m of page.matchAll(/```yaml\n# recipe: ([\w-]+)\n([\s\S]*?)```/g)) recipes.set(m[1]!, (await parseYamlStream(m[2]!)) as Obj[]);
}, 60_000);

const recipe = (name: string): Obj[] => {
  const r = recipes.get(name);
  if (!r) throw new Error(`no "# recipe: ${name}" block in docs/ext-authz-grpc.md`);
  return r;
};
const byKind = (objs: Obj[], kind: string): Obj => {
  const o = objs.find((x) => x.kind === kind);
  if (!o) throw new Error(`no ${kind}`);
  return o;
};

describe('the Envoy recipe', () => {
  let envoy: Obj;
  let routes: Obj[];
  let filters: Obj[];
  beforeAll(() => {
    envoy = recipe('envoy')[0]!;
    const hcm = envoy.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
    routes = hcm.route_config.virtual_hosts[0].routes;
    filters = hcm.http_filters;
  });

  it('ext_authz over gRPC, V3, failure_mode_allow false, a call timeout above the sidecar\'s deadline, the cluster on 127.0.0.1:7703 over HTTP/2', () => {
    const names = filters.map((f) => f.name);
    const authz = filters.find((f) => f.name === 'envoy.filters.http.ext_authz')!.typed_config;
    expect(authz['@type']).toBe('type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz');
    expect(authz.transport_api_version).toBe('V3');
    expect(authz.failure_mode_allow).toBe(false);
    expect(authz.http_service).toBeUndefined();
    expect(Number.parseFloat(authz.grpc_service.timeout) * 1000).toBeGreaterThan(DEFAULT_UPSTREAM_TIMEOUT_MS);
    const cluster = envoy.static_resources.clusters.find((c: Obj) => c.name === authz.grpc_service.envoy_grpc.cluster_name);
    expect(cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({ address: '127.0.0.1', port_value: CHART_GRPC_PORT });
    expect(cluster.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config).toHaveProperty('http2_protocol_options');
    expect(cluster.health_checks[0]).toHaveProperty('grpc_health_check');
    // The client's copies go first, then the identity is put in the user header, then the check, then the router.
    const mutation = filters.find((f) => f.name === 'envoy.filters.http.header_mutation')!.typed_config.mutations.request_mutations.map((m: Obj) => m.remove);
    expect(mutation).toEqual([DEFAULT_FORWARD_AUTH_USER_HEADER, 'x-consent-config-key']);
    const jwt = filters.find((f) => f.name === 'envoy.filters.http.jwt_authn')!.typed_config;
    expect(jwt.providers.idp.claim_to_headers[0].header_name).toBe(DEFAULT_FORWARD_AUTH_USER_HEADER);
    expect(names).toEqual(['envoy.filters.http.header_mutation', 'envoy.filters.http.jwt_authn', 'envoy.filters.http.ext_authz', 'envoy.filters.http.router']);
  });

  it('every route either names its configKey in context_extensions or turns the check off', () => {
    for (const r of routes) {
      const perRoute = r.typed_per_filter_config['envoy.filters.http.ext_authz'];
      expect(perRoute['@type']).toBe('type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute');
      if (perRoute.disabled === true) continue;
      expect(perRoute.check_settings.context_extensions.configKey).toMatch(/^[\w.-]+$/);
    }
  });

  describe('asked of a real sidecar as Envoy asks, per route', () => {
    let upstream: ScriptedUpstream;
    let sidecar: TestSidecar;
    let client: GrpcClient;
    beforeAll(async () => {
      upstream = await startUpstream();
      upstream.reply((req) => ({ body: allow((JSON.parse(req.body) as { configKey: string }).configKey, Date.now() + 60_000) }));
      sidecar = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0' });
      client = new GrpcClient(sidecar.handle.urls.grpc!);
    });
    afterAll(async () => {
      client?.close();
      await sidecar?.close();
      await upstream?.close();
    });

    it('each checked route: ALLOW for its configKey, with the user from the JWT\'s header', async () => {
      const checked = routes.map((r) => r.typed_per_filter_config['envoy.filters.http.ext_authz']).filter((p) => p.disabled !== true);
      expect(checked.length).toBeGreaterThanOrEqual(2);
      for (const perRoute of checked) {
        const { res, err } = await client.check({
          attributes: { request: { http: { method: 'GET', path: '/', headers: { [DEFAULT_FORWARD_AUTH_USER_HEADER]: 'alice' } } }, context_extensions: perRoute.check_settings.context_extensions },
        });
        expect(err).toBeUndefined();
        expect(res!.status?.code ?? 0).toBe(0);
        expect(headersOf(res!)['x-consent-valid-until']).toMatch(/^\d+$/);
      }
      const asked = upstream.requests.map((r) => JSON.parse(r.body) as { configKey: string }).map((b) => b.configKey);
      expect(asked).toEqual(checked.map((p) => p.check_settings.context_extensions.configKey));
    });
  });
});

describe('the Istio recipe', () => {
  it('every object passes its Istio schema (kubernetes-models)', () => {
    const objs = recipe('istio');
    expect(objs.map((o) => o.kind)).toEqual(['ServiceEntry', 'AuthorizationPolicy', 'EnvoyFilter', 'VirtualService']);
    for (const o of objs) {
      const model = { ServiceEntry, AuthorizationPolicy, EnvoyFilter, VirtualService }[o.kind as 'ServiceEntry'];
      expect(() => new model(o as never).validate(), o.kind).not.toThrow();
    }
  });

  it('the provider, the ServiceEntry and the policy name each other; port 7703 on loopback; CUSTOM; fail closed', () => {
    const provider = recipe('istio-mesh-config')[0]!.meshConfig.extensionProviders[0];
    const objs = recipe('istio');
    const entry = byKind(objs, 'ServiceEntry');
    const policy = byKind(objs, 'AuthorizationPolicy');
    expect(provider.envoyExtAuthzGrpc).toMatchObject({ service: entry.spec.hosts[0], port: CHART_GRPC_PORT, failOpen: false });
    expect(Number.parseFloat(provider.envoyExtAuthzGrpc.timeout) * 1000).toBeGreaterThan(DEFAULT_UPSTREAM_TIMEOUT_MS);
    expect(entry.spec.endpoints).toEqual([{ address: '127.0.0.1' }]);
    expect(entry.spec.ports[0]).toMatchObject({ number: CHART_GRPC_PORT, protocol: 'GRPC' });
    expect(policy.spec).toMatchObject({ action: 'CUSTOM', provider: { name: provider.name } });
  });

  it('the configKey per route: context_extensions on inbound routes, or the header set (not appended) by the VirtualService', () => {
    const objs = recipe('istio');
    const patch = byKind(objs, 'EnvoyFilter').spec.configPatches[0];
    expect(patch).toMatchObject({ applyTo: 'HTTP_ROUTE', match: { context: 'SIDECAR_INBOUND' }, patch: { operation: 'MERGE' } });
    expect(patch.patch.value.typed_per_filter_config['envoy.filters.http.ext_authz'].check_settings.context_extensions.configKey).toBe('marketing-email');
    const headers = byKind(objs, 'VirtualService').spec.http[0].headers.request;
    expect(headers.set['x-consent-config-key']).toBe('marketing-email');
    expect(headers.add).toBeUndefined();
    expect(headers.remove).toContain(DEFAULT_FORWARD_AUTH_USER_HEADER);
  });
});

describe('the Envoy Gateway recipe', () => {
  it('extAuth over gRPC to the sidecar\'s Service on 7703, fail closed, the headers it needs; the configKey set early; the Service valid', () => {
    const objs = recipe('envoy-gateway');
    const policy = byKind(objs, 'SecurityPolicy');
    expect(policy.apiVersion).toBe('gateway.envoyproxy.io/v1alpha1');
    const service = byKind(objs, 'Service');
    expect(() => new Service(service as never).validate()).not.toThrow();
    expect(policy.spec.extAuth.failOpen).toBe(false);
    expect(policy.spec.extAuth.http).toBeUndefined();
    expect(policy.spec.extAuth.grpc.backendRefs).toEqual([{ name: service.metadata.name, port: CHART_GRPC_PORT }]);
    expect(policy.spec.extAuth.headersToExtAuth).toEqual(expect.arrayContaining([DEFAULT_FORWARD_AUTH_USER_HEADER, 'x-consent-config-key']));
    expect(service.spec.ports[0]).toMatchObject({ port: CHART_GRPC_PORT, targetPort: 'consent-grpc' });
    const early = byKind(objs, 'ClientTrafficPolicy').spec.headers.earlyRequestHeaders;
    expect(early.set).toEqual([{ name: 'x-consent-config-key', value: 'marketing-email' }]);
    expect(early.remove).toContain(DEFAULT_FORWARD_AUTH_USER_HEADER);
  });
});
