import { describe, expect, it } from 'vitest';
import { helmTemplateRaw, mustFind, render } from '../helpers/helm.js';
import { SCENARIOS, valuesPath } from './scenarios.js';

// decisionSocket: the decision API on a Unix socket in an emptyDir the app container shares.

interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
  volumes: { name: string; emptyDir?: { medium?: string } }[];
}

const native = valuesPath(SCENARIOS.find((s) => s.file === 'native-values.yaml')!);
const podOf = async (set: string[]): Promise<PodSpec> =>
  ((mustFind(await render({ valuesFiles: [native], set }), 'Deployment').spec as { template: { spec: PodSpec } }).template.spec);

describe('chart: decisionSocket', () => {
  it('off by default: the decision API listens on loopback TCP, no socket volume', async () => {
    const pod = await podOf([]);
    const sidecar = pod.initContainers!.find((c) => c.name === 'consent-sidecar')!;
    expect(sidecar.env!.find((e) => e.name === 'CONSENT_SIDECAR_LISTEN')!.value).toBe('127.0.0.1:7700');
    expect(pod.volumes.map((v) => v.name)).not.toContain('consent-sidecar-socket');
  });

  it('on: --listen unix:<mountPath>/decision.sock, one in-memory emptyDir mounted by the sidecar and the app, and the app told the socket', async () => {
    const pod = await podOf(['decisionSocket.enabled=true', 'decisionSocket.mountPath=/var/run/cs']);
    const sidecar = pod.initContainers!.find((c) => c.name === 'consent-sidecar')!;
    expect(sidecar.env!.find((e) => e.name === 'CONSENT_SIDECAR_LISTEN')!.value).toBe('unix:/var/run/cs/decision.sock');
    expect(pod.volumes.filter((v) => v.name === 'consent-sidecar-socket')).toEqual([{ name: 'consent-sidecar-socket', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }]);
    const app = pod.containers.find((c) => c.name !== 'consent-sidecar')!;
    for (const c of [sidecar, app]) expect(c.volumeMounts).toContainEqual({ name: 'consent-sidecar-socket', mountPath: '/var/run/cs' });
    expect(app.env!.some((e) => e.value === 'unix:/var/run/cs/decision.sock')).toBe(true);
  });

  it('a relative mountPath is refused by the schema', async () => {
    const r = await helmTemplateRaw({ valuesFiles: [native], set: ['decisionSocket.enabled=true', 'decisionSocket.mountPath=run/cs'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/decisionSocket/);
  });
});
