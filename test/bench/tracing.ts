/**
 * The cache-hit path with OpenTelemetry spans off, on at ratio 1 and on at 0.01 (`traceidratio`,
 * requests without a `traceparent`), each against off in alternating rounds; the cost of an app's
 * `traceparent` passed on with spans off; and, with `beforeCli` (BENCH_TRACING_BEFORE_CLI: a
 * dist/cli.js built from before issue 24), off against that build. The sidecars, the upstream
 * (baselines.mjs), the OTLP/HTTP sink (otlp-sink.mjs) and the load generator each run in a process
 * of their own.
 */
import { request } from 'undici';
import { closedLoop, compare, freePort, startChild, stopChild, type Comparison } from './lib.js';

const BASELINES = new URL('./baselines.mjs', import.meta.url).pathname;
const SINK = new URL('./otlp-sink.mjs', import.meta.url).pathname;
const CHECK = '/v1/authorization/check';
const ALLOW_BODY = JSON.stringify({ userReference: 'alice', configKey: 'marketing-email' });
const APP_TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
/** OTEL_* of the shell must not turn an "off" sidecar on. */
const OFF: NodeJS.ProcessEnv = { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '', OTEL_TRACES_EXPORTER: '' };

interface Options {
  readonly rounds: number;
  readonly durationS: number;
  readonly connections: number;
  readonly cli: string;
  readonly beforeCli?: string | undefined;
}

type Sidecar = { url: string; pid: number; stop(): Promise<void> };

async function serve(cli: string, upstreamUrl: string, env: NodeJS.ProcessEnv): Promise<Sidecar> {
  const [port, admin] = [await freePort(), await freePort()];
  const args = [cli, 'serve', '--upstream-url', upstreamUrl, '--api-key', 'bench-key', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn'];
  const child = await startChild(process.execPath, args, `http://127.0.0.1:${admin}/readyz`, env);
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => stopChild(child) };
}

export async function benchTracing(o: Options): Promise<{ comparisons: Comparison[]; spansExported: number }> {
  const upPort = await freePort();
  const up = await startChild(process.execPath, [BASELINES, 'upstream', String(upPort), String(Date.now() + 3_600_000)], `http://127.0.0.1:${upPort}/ready`);
  const sinkPort = await freePort();
  const sink = await startChild(process.execPath, [SINK, String(sinkPort)], `http://127.0.0.1:${sinkPort}/ready`);
  const upstreamUrl = `http://127.0.0.1:${upPort}`;
  const on = (ratio: string): NodeJS.ProcessEnv => ({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio, OTEL_BSP_SCHEDULE_DELAY: '1000' });
  const sidecars: Sidecar[] = [];
  const start = async (cli: string, env: NodeJS.ProcessEnv) => {
    const s = await serve(cli, upstreamUrl, env);
    sidecars.push(s);
    return s;
  };
  try {
    const off = await start(o.cli, OFF);
    const all = await start(o.cli, on('1'));
    const some = await start(o.cli, on('0.01'));
    const before = o.beforeCli ? await start(o.beforeCli, OFF) : null;
    const hit = (s: Sidecar, headers?: Record<string, string>) => ({ url: `${s.url}${CHECK}`, body: ALLOW_BODY, ...(headers ? { headers } : {}) });
    for (const s of sidecars) await closedLoop(hit(s), o.connections, 2);
    const run = (s: Sidecar, headers?: Record<string, string>) => () => closedLoop(hit(s, headers), o.connections, o.durationS);
    const vs = (name: string, baselineName: string, baseline: Sidecar, subject: Sidecar, headers?: Record<string, string>) =>
      compare({ name, baselineName, subjectName: name, baseline: run(baseline), subject: run(subject, headers), baselinePids: [baseline.pid], subjectPids: [subject.pid], rounds: o.rounds });
    const comparisons: Comparison[] = [];
    if (before) comparisons.push(await vs('Cache hit, tracing off vs the build before issue 24', 'before issue 24', before, off));
    comparisons.push(await vs('Cache hit, tracing off, the app sends a traceparent, vs none', 'tracing off, no traceparent', off, off, { traceparent: APP_TRACEPARENT }));
    comparisons.push(await vs('Cache hit, tracing on, every request sampled (ratio 1) vs off', 'tracing off', off, all));
    comparisons.push(await vs('Cache hit, tracing on, ratio 0.01 vs off', 'tracing off', off, some));
    const spansExported = Number(await (await request(`http://127.0.0.1:${sinkPort}/count`)).body.text());
    return { comparisons, spansExported };
  } finally {
    for (const s of sidecars) await s.stop();
    await stopChild(sink);
    await stopChild(up);
  }
}
