import { describe, expect, it } from 'vitest';
import { helmTemplateRaw, mustFind, render, type K8sObject } from '../helpers/helm.js';
import { SCENARIOS, valuesPath } from './scenarios.js';

// grpc.enabled: --grpc-listen on 127.0.0.1:7703 (the Envoy in the pod), a container port named
// consent-grpc; the probes and the NetworkPolicy stay as they are without it.

interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: unknown;
  startupProbe?: unknown;
  livenessProbe?: unknown;
}

const scenario = (file: string): string => valuesPath(SCENARIOS.find((s) => s.file === file)!);
const sidecarOf = (objects: K8sObject[]): Container => {
  const spec = (mustFind(objects, 'Deployment').spec as { template: { spec: { initContainers?: Container[]; containers: Container[] } } }).template.spec;
  return [...(spec.initContainers ?? []), ...spec.containers].find((c) => c.name === 'consent-sidecar')!;
};
const envOf = (c: Container): Record<string, string | undefined> => Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));

describe('chart: grpc', () => {
  it('off by default: no --grpc-listen, no consent-grpc port', async () => {
    const c = sidecarOf(await render({ valuesFiles: [scenario('native-values.yaml')] }));
    expect(envOf(c).CONSENT_SIDECAR_GRPC_LISTEN).toBeUndefined();
    expect((c.ports ?? []).map((p) => p.name)).not.toContain('consent-grpc');
  });

  it('on: 127.0.0.1:7703 and port consent-grpc, the bounds from config; probes and NetworkPolicy unchanged', async () => {
    const on = await render({ valuesFiles: [scenario('grpc-values.yaml')] });
    const off = await render({ valuesFiles: [scenario('grpc-values.yaml')], set: ['grpc.enabled=false'] });
    const c = sidecarOf(on);
    expect(envOf(c)).toMatchObject({ CONSENT_SIDECAR_GRPC_LISTEN: '127.0.0.1:7703', CONSENT_SIDECAR_GRPC_MAX_MESSAGE_BYTES: '131072', CONSENT_SIDECAR_GRPC_MAX_CONCURRENT_STREAMS: '500', CONSENT_SIDECAR_GRPC_MAX_STREAMS: '2000' });
    expect(c.ports).toContainEqual({ name: 'consent-grpc', containerPort: 7703, protocol: 'TCP' });
    const d = sidecarOf(off);
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'] as const) expect(c[probe]).toEqual(d[probe]);
    expect(mustFind(on, 'NetworkPolicy').spec).toEqual(mustFind(off, 'NetworkPolicy').spec);
    expect(JSON.stringify(mustFind(on, 'NetworkPolicy'))).not.toContain('consent-grpc');
  });

  it('another port and address (a proxy in other pods), IPv6 in brackets; an unknown key refused', async () => {
    const c = sidecarOf(await render({ valuesFiles: [scenario('grpc-values.yaml')], set: ['grpc.port=9191', 'grpc.bindAddress=::'] }));
    expect(envOf(c).CONSENT_SIDECAR_GRPC_LISTEN).toBe('[::]:9191');
    const r = await helmTemplateRaw({ valuesFiles: [scenario('grpc-values.yaml')], set: ['grpc.listen=1'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/grpc: Additional property listen is not allowed/);
  });
});

describe('the .proto files ship', () => {
  it('npm run build copies src/grpc/proto into dist (the package\'s files, the image\'s COPY), unchanged', async () => {
    const { readFileSync, readdirSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { ROOT } = await import('../helpers/helm.js');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[]; scripts: { build: string } };
    expect(pkg.files).toContain('dist');
    expect(pkg.scripts.build).toContain("cpSync('src/grpc/proto', 'dist/grpc/proto'");
    // The image copies what runs (the bundle) and these, not the whole of dist/.
    expect(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).toMatch(/^COPY --from=build \/app\/dist\/grpc\/proto \.\/dist\/grpc\/proto$/m);
    const files = readdirSync(join(ROOT, 'src/grpc/proto'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.proto'));
    expect(files.length).toBe(6);
    for (const f of files) expect(readFileSync(join(ROOT, 'dist/grpc/proto', f), 'utf8'), f).toBe(readFileSync(join(ROOT, 'src/grpc/proto', f), 'utf8'));
  });
});
