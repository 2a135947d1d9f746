import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/assembly/sidecar.js';
import { VERSION } from '../../src/lib/version.js';

const CONTRACT_FAMILIES: Record<string, string> = {
  consent_sidecar_decisions_total: 'counter',
  consent_sidecar_pre_evaluation_denials_total: 'counter',
  consent_sidecar_fail_closed_total: 'counter',
  consent_sidecar_upstream_request_duration_seconds: 'histogram',
  consent_sidecar_cache_entries: 'gauge',
  consent_sidecar_circuit_breaker_state: 'gauge',
  consent_sidecar_build_info: 'gauge',
  consent_sidecar_decision_duration_seconds: 'histogram',
};

let upstream: Server;
let sidecar: SidecarHandle;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ decision: 'DENY', reason: 'config_not_published' }));
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const config = loadServeConfig(
    {
      'upstream-url': `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      'api-key': 'k',
      listen: '127.0.0.1:0',
      'admin-listen': '127.0.0.1:0',
    },
    {},
  );
  sidecar = await startSidecar(config, { logger: silentLogger() });
});

afterAll(async () => {
  await sidecar?.close();
  await new Promise((r) => upstream?.close(r));
});

describe('admin listener', () => {
  it('answers the probes', async () => {
    expect((await fetch(`${sidecar.urls.admin}/healthz`)).status).toBe(200);
    const ready = await fetch(`${sidecar.urls.admin}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    expect((await fetch(`${sidecar.urls.admin}/nope`)).status).toBe(404);
  });

  it('exposes the contract metric families with their types, and Node defaults', async () => {
    await fetch(`${sidecar.urls.decision}/v1/authorization/check`, {
      method: 'POST',
      body: JSON.stringify({ userReference: 'secret-customer-42', configKey: 'k' }),
    });
    const res = await fetch(`${sidecar.urls.admin}/metrics`);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    for (const [name, type] of Object.entries(CONTRACT_FAMILIES)) expect(text).toContain(`# TYPE ${name} ${type}`);
    expect(text).toContain('consent_sidecar_pre_evaluation_denials_total{reason="config_not_published"} 1');
    expect(text).toContain('consent_sidecar_decisions_total{decision="deny",source="upstream",route="check"} 1');
    expect(text).toContain('process_cpu_seconds_total');
    expect(text).toContain(`consent_sidecar_build_info{version="${VERSION}"} 1`);
    // The sidecar's own answer time: the check above came from upstream.
    expect(text).toContain('consent_sidecar_decision_duration_seconds_count{source="upstream"} 1');
    expect(text).toContain('consent_sidecar_decision_duration_seconds_count{source="cache"} 0');
    expect(text).not.toContain('secret-customer-42');
  });

  it('is clean under promtool check metrics', async () => {
    const promtool = spawnSync('promtool', ['--version']);
    if (promtool.error) throw new Error('promtool is missing: apt-get install prometheus (.ci/run does)');
    const text = await (await fetch(`${sidecar.urls.admin}/metrics`)).text();
    const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(`${run.stdout}${run.stderr}`.trim()).toBe('');
    expect(run.status).toBe(0);
  });
});
