import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, mustFind, render, run, type K8sObject } from '../helpers/helm.js';
import { SCENARIOS, valuesPath } from './scenarios.js';
import { freePort } from '../helpers/ports.js';

/**
 * The chart and the binary agree: `serve` started with exactly the environment the chart renders
 * (secret files written from the Secret the chart renders) becomes ready, serves the probes and
 * metrics the chart and its alerts rely on, and stops cleanly on SIGTERM. Runs the build
 * (`node dist/cli.js serve`), as the image does.
 */

interface EnvVar {
  name: string;
  value?: string;
}
interface Container {
  name: string;
  args: string[];
  env: EnvVar[];
  lifecycle?: { postStart?: { exec?: { command: string[] } } };
}

const podContainers = (d: K8sObject): Container[] => {
  const spec = (d.spec as { template: { spec: { initContainers?: Container[]; containers: Container[] } } }).template.spec;
  return [...(spec.initContainers ?? []), ...spec.containers];
};

let work: string;
let child: ChildProcess | undefined;
let output = '';
let sidecar: Container;
let adminPort: number;
let holdScript: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'consent-sidecar-serve-'));
  // The ports are picked free, then bound seconds later (two helm renders in between), by a serve
  // that binds 0.0.0.0 for the webhook listener: in a busy parallel suite another process can take
  // one meanwhile. A start that fails with EADDRINUSE is tried again on fresh ports (three times at
  // most); any other failure is the test's to report.
  for (let attempt = 1; ; attempt++) {
    await startServe();
    const outcome = await new Promise<'started' | 'exited'>((resolve) => {
      const check = setInterval(() => {
        if (output.includes('"event":"started"')) {
          clearInterval(check);
          resolve('started');
        }
      }, 20);
      // 'close': its output is all in, so nothing of a failed try is added after the reset below.
      child!.once('close', () => {
        clearInterval(check);
        resolve('exited');
      });
    });
    if (outcome === 'started' || attempt === 3 || !output.includes('EADDRINUSE')) break;
    output = '';
  }
}, 120_000);

async function startServe(): Promise<void> {
  const [decision, webhook, admin, deadUpstream, deadCollector] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  adminPort = admin;
  const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;
  const set = [`ports.decision=${decision}`, `ports.webhook=${webhook}`, `ports.admin=${admin}`, `secrets.mountPath=${work}`];
  const [native, classic] = await Promise.all([
    render({ valuesFiles: [valuesPath(s)], set: [...set, `config.upstreamUrl=http://127.0.0.1:${deadUpstream}`, `tracing.endpoint=http://127.0.0.1:${deadCollector}`, 'tracing.serviceName=shop-consent'] }),
    render({ valuesFiles: [valuesPath(s)], set: [...set, 'mode=classic'] }),
  ]);
  sidecar = podContainers(mustFind(native, 'Deployment')).find((c) => c.name === 'consent-sidecar')!;
  holdScript = podContainers(mustFind(classic, 'Deployment')).find((c) => c.name === 'consent-sidecar')!.lifecycle!.postStart!.exec!
    .command[2]!;
  // What the kubelet would mount: the chart's Secrets (its values' and the app signing one it makes), one file per key.
  for (const secret of native.filter((o) => o.kind === 'Secret') as (K8sObject & { stringData?: Record<string, string>; data?: Record<string, string> })[]) {
    for (const [key, value] of Object.entries(secret.stringData ?? {})) await writeFile(join(work, key), value);
    for (const [key, value] of Object.entries(secret.data ?? {})) await writeFile(join(work, key), Buffer.from(value, 'base64'));
  }

  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  for (const e of sidecar.env) if (e.value !== undefined) env[e.name] = e.value;
  child = spawn(process.execPath, [join(ROOT, 'dist/cli.js'), ...sidecar.args], { cwd: ROOT, env, stdio: 'pipe' });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
}

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
  if (work) await rm(work, { recursive: true, force: true });
});

describe('serve with the environment the chart renders', () => {
  it('takes the chart\'s tracing values as the standard OTEL_* variables and turns spans on with them', async () => {
    const env = Object.fromEntries(sidecar.env.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01', OTEL_SERVICE_NAME: 'shop-consent' });
    expect(env.OTEL_EXPORTER_OTLP_ENDPOINT).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await expect.poll(() => output.includes('"event":"tracing_on"'), { timeout: 60_000 }).toBe(true);
    expect(output).toMatch(/"event":"tracing_on","sampler":"parentbased_traceidratio","ratio":0.01/);
  }, 70_000);


  it('becomes ready: the classic-mode hold script sees /readyz answer 200', async () => {
    const result = await run(process.execPath, ['-e', holdScript]);
    expect(result.code, output).toBe(0);
  }, 70_000);

  it('answers the liveness probe and exposes every metric family the alerts use', async () => {
    const health = await fetch(`http://127.0.0.1:${adminPort}/healthz`);
    expect(health.status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
    for (const family of [
      'consent_sidecar_decisions_total',
      'consent_sidecar_pre_evaluation_denials_total',
      'consent_sidecar_fail_closed_total',
      'consent_sidecar_circuit_breaker_state',
      'consent_sidecar_webhook_deliveries_total',
      'consent_sidecar_webhook_rejections_total',
    ]) {
      expect(metrics, family).toMatch(new RegExp(`^# TYPE ${family} `, 'm'));
    }
  });

  it('took the secrets from the files (no secret in the environment) and logs JSON without them', () => {
    const names = sidecar.env.map((e) => e.name);
    expect(names).toContain('CONSENT_SIDECAR_API_KEY_FILE');
    // The app signing secret the chart makes is one the sidecar takes: its forwards are signed.
    expect(names).toContain('CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE');
    expect(output).not.toContain('forwards_unsigned');
    expect(names).not.toContain('CONSENT_SIDECAR_API_KEY');
    const lines = output.trim().split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(output).not.toContain('ck_test_0123456789');
    expect(output).not.toContain('whsec_');
  });

  it('stops cleanly on SIGTERM', async () => {
    const exited = once(child!, 'exit');
    child!.kill('SIGTERM');
    const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
  }, 30_000);
});
