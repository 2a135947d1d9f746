import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderShippedConf } from '../helpers/nginx.js';
import { HELM, mustFind, render, run, vendoredExampleChart, type K8sObject } from '../helpers/helm.js';
import { schemaProblems, unknownFieldProblems } from './validate.js';

// The shop example with nginx.enabled: nginx in the pod in front of the app, configured with the
// forward-auth example that test/http/forward-auth-nginx.test.ts runs. Helm's rendering of that
// file must be exactly what the nginx test runs, with the same values substituted.

interface Container {
  name: string;
  image?: string;
  ports?: { name: string; containerPort: number }[];
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  containers: Container[];
  volumes?: { name: string; configMap?: { name: string }; emptyDir?: object }[];
}

const podSpec = (d: K8sObject): PodSpec => (d.spec as { template: { spec: PodSpec } }).template.spec;

let on: K8sObject[];
let off: K8sObject[];
let otherIdentity: K8sObject[];
let dir: string;
let cleanup: (() => Promise<void>) | undefined;

beforeAll(async () => {
  const vendored = await vendoredExampleChart();
  [dir, cleanup] = [vendored.dir, vendored.cleanup];
  [on, off, otherIdentity] = await Promise.all([
    render({ chart: dir, set: ['nginx.enabled=true', 'nginx.configKey=checkout emails&more'] }),
    render({ chart: dir }),
    render({ chart: dir, set: ['nginx.enabled=true', 'nginx.identityHeader=X-Auth-Request-User'] }),
  ]);
}, 60_000);

afterAll(async () => {
  await cleanup?.();
});

describe('shop example: nginx forward-auth in the pod', () => {
  it('renders the shipped config exactly as the nginx test runs it', () => {
    const cm = mustFind(on, 'ConfigMap', 'shop-nginx') as K8sObject & { data: Record<string, string> };
    const expected = renderShippedConf({
      '.Values.nginx.port': '8081',
      '.Values.nginx.appPort': '8080',
      'include "consent-sidecar.decisionUrl" . | trimPrefix "http://"': '127.0.0.1:7700',
      '.Values.nginx.identityHeader | lower | replace "-" "_"': 'x_forwarded_user',
    '.Values.nginx.configKey | urlquery': encodeURIComponent('checkout emails&more').replace(/%20/g, '+'),
    });
    expect(cm.data['default.conf']).toBe(expected);
    expect(cm.data['default.conf']).not.toContain('{{');
  });

  it('reads the identity from nginx.identityHeader, in the check and towards the app', () => {
    const conf = (mustFind(otherIdentity, 'ConfigMap', 'shop-nginx') as K8sObject & { data: Record<string, string> }).data['default.conf']!;
    expect(conf.match(/proxy_set_header X-User-Reference \$http_x_auth_request_user;/g)).toHaveLength(2);
    expect(conf).not.toContain('x_forwarded_user');
  });

  it('adds an nginx container with the config mounted read-only, a writable /tmp, and the Service through it', () => {
    const deployment = mustFind(on, 'Deployment', 'shop');
    const pod = podSpec(deployment);
    expect(pod.containers.map((c) => c.name)).toEqual(['shop', 'nginx']);
    const nginx = pod.containers.find((c) => c.name === 'nginx')!;
    expect(nginx.ports).toEqual([{ name: 'nginx', containerPort: 8081 }]);
    expect(nginx.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    expect(nginx.volumeMounts).toEqual([
      { name: 'nginx-config', mountPath: '/etc/nginx/conf.d', readOnly: true },
      { name: 'nginx-tmp', mountPath: '/tmp' },
    ]);
    expect(pod.volumes?.find((v) => v.name === 'nginx-config')?.configMap?.name).toBe('shop-nginx');
    expect((deployment.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations['checksum/nginx']).toMatch(/^[0-9a-f]{64}$/);
    const service = mustFind(on, 'Service', 'shop');
    expect((service.spec as { ports: { name: string; targetPort: unknown }[] }).ports.find((p) => p.name === 'http')?.targetPort).toBe('nginx');
    expect([...on].flatMap(schemaProblems)).toEqual([]);
    expect(unknownFieldProblems(on)).toEqual([]);
  });

  it('is off by default: no nginx, no ConfigMap, the Service straight to the app', () => {
    expect(podSpec(mustFind(off, 'Deployment', 'shop')).containers.map((c) => c.name)).toEqual(['shop']);
    expect(off.filter((o) => o.kind === 'ConfigMap')).toEqual([]);
    const service = mustFind(off, 'Service', 'shop');
    expect((service.spec as { ports: { name: string; targetPort: unknown }[] }).ports.find((p) => p.name === 'http')?.targetPort).toBe('http');
  });

  it('helm lint --strict passes with nginx on', async () => {
    const result = await run(HELM, ['lint', '--strict', dir, '--set', 'nginx.enabled=true']);
    expect(result.stderr + result.stdout).toContain('0 chart(s) failed');
    expect(result.code).toBe(0);
  });
});
