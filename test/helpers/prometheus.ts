import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './ports.js';
import { until } from './wait.js';

/**
 * Debian's Prometheus server (package `prometheus`, which also gives promtool), or the one on PATH.
 * A missing one fails the test, saying how to get it: the dashboard is only proven on a real one.
 */
export function prometheusBinary(): string {
  if (existsSync('/usr/bin/prometheus')) return '/usr/bin/prometheus';
  const which = spawnSync('sh', ['-c', 'command -v prometheus'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim() !== '') return which.stdout.trim();
  throw new Error('prometheus is missing: run bash test/setup.sh (Debian/Ubuntu: apt-get install --no-install-recommends prometheus)');
}

/** One answer of `GET /api/v1/query`: its status and, on success, the result vector. */
export interface QueryAnswer {
  readonly status: 'success' | 'error';
  readonly errorType?: string;
  readonly error?: string;
  readonly data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
}

export interface RunningPrometheus {
  readonly url: string;
  /** An instant query; never throws on a PromQL error (the answer says it). */
  query(expr: string): Promise<QueryAnswer>;
  /** Prometheus' own output so far (for failure messages). */
  output(): string;
  close(): Promise<void>;
}

/**
 * Starts Prometheus on a free loopback port with its own storage, scraping `targets` (host:port of
 * admin listeners) every second as job `job`, each series also labelled with `labels` (what the
 * ServiceMonitor's relabelling and Kubernetes would add). Resolves once every target is up.
 */
export async function startPrometheus(o: { job: string; targets: readonly string[]; labels?: Readonly<Record<string, string>> }): Promise<RunningPrometheus> {
  const bin = prometheusBinary();
  const dir = await mkdtemp(join(tmpdir(), 'consent-sidecar-prometheus-'));
  const port = await freePort();
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    scrape_configs: [{ job_name: o.job, static_configs: [{ targets: o.targets, labels: o.labels ?? {} }] }],
  };
  // JSON is YAML.
  await writeFile(join(dir, 'prometheus.yml'), JSON.stringify(config, null, 2));
  let out = '';
  const child: ChildProcess = spawn(
    bin,
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = `http://127.0.0.1:${port}`;
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000).then(() => child.kill('SIGKILL'))]);
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  const query = async (expr: string): Promise<QueryAnswer> => {
    const res = await fetch(`${url}/api/v1/query?${new URLSearchParams({ query: expr })}`);
    return (await res.json()) as QueryAnswer;
  };
  try {
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}:\n${out}`);
      try {
        const up = await query(`up{job="${o.job}"} == 1`);
        return up.status === 'success' && (up.data?.result.length ?? 0) === o.targets.length;
      } catch {
        return false; // not listening yet
      }
    }, `prometheus scraping ${o.targets.join(', ')}`, 60_000);
  } catch (err) {
    await close();
    throw err;
  }
  return { url, query, output: () => out, close };
}
