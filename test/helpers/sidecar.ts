import type { IncomingHttpHeaders } from 'node:http';
import { afterEach } from 'vitest';
import { Pool } from 'undici';
import { loadServeConfig } from '../../src/config/index.js';
import { createLogger, silentLogger, type Logger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/assembly/sidecar.js';
import { startUpstream, type Reply, type ReplyFn, type ScriptedUpstream } from './upstream.js';

/** A clock a test moves by hand, injected as the sidecar's `now`. Starts on a whole second. */
export interface TestClock {
  now(): number;
  set(ms: number): void;
  advance(ms: number): void;
}

export function testClock(start = Math.floor(Date.now() / 1000) * 1000): TestClock {
  let t = start;
  return {
    now: () => t,
    set: (ms) => {
      t = ms;
    },
    advance: (ms) => {
      t += ms;
    },
  };
}

/** What the app got back from the sidecar. */
export interface AppResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly json: Record<string, unknown> | undefined;
  /** `x-consent-decision-source`. */
  readonly source: string | undefined;
}

export interface TestSidecar {
  readonly handle: SidecarHandle;
  /** `POST /v1/authorization/check` with a JSON (or raw string) body. */
  check(body: unknown, headers?: Record<string, string>): Promise<AppResponse>;
  /** Any request on the decision listener; `path` is sent exactly as given. */
  send(method: string, path: string, opts?: { body?: string; headers?: Record<string, string> }): Promise<AppResponse>;
  /** Any request on the admin listener. */
  admin(path: string): Promise<AppResponse>;
  /** The Prometheus exposition from `GET /metrics`. */
  metricsText(): Promise<string>;
  /** One sample of `/metrics` (summed over series matching `labels`). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  close(): Promise<void>;
}

/**
 * Flags every test starts from: loopback, port 0, a breaker that stays out of the way, and an
 * upstream deadline long enough that a service which does answer is never timed out on a busy
 * machine. A test about the deadline sets a short one and a service that never answers
 * (`fault: 'hang'`), so no answer races the deadline.
 */
export const BASE_FLAGS: Readonly<Record<string, string>> = {
  'api-key': 'test-api-key',
  listen: '127.0.0.1:0',
  'admin-listen': '127.0.0.1:0',
  'upstream-timeout-ms': '5000',
  'breaker-failure-threshold': '1000',
  'breaker-cooldown-ms': '200',
  'cache-safety-margin-ms': '1000',
  'shutdown-timeout-ms': '1000',
  // The REDEC reconciler (on by default with --app-webhook-url) would list the service at start:
  // tests of other capabilities count the service's calls, so it is off here and tested in test/redec/.
  'redec-reconcile-interval-ms': '0',
  // The start-up API key check is one more call to the service (and retries while it does not answer
  // 2xx/4xx): off here for the same reason, tested in test/assembly/upstream-key-probe.test.ts.
  'api-key-check': 'off',
};

/** The body parsed as JSON, or undefined when it is not JSON (an answer a test asserts on as text). */
export function parsedJson(text: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

async function call(pool: Pool, method: string, path: string, body?: string, headers?: Record<string, string>): Promise<AppResponse> {
  const res = await pool.request({
    method: method as 'POST',
    path,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body ?? null,
  });
  const text = await res.body.text();
  const json = parsedJson(text);
  const source = res.headers['x-consent-decision-source'];
  return {
    status: res.statusCode,
    headers: res.headers as IncomingHttpHeaders,
    text,
    json,
    source: typeof source === 'string' ? source : undefined,
  };
}

/**
 * Reads one sample from a Prometheus exposition, summing the series whose labels include `labels`.
 * A series never incremented is absent from the exposition and reads as 0; the family itself must exist.
 */
export function sampleOf(text: string, name: string, labels: Record<string, string> = {}): number {
  if (!new RegExp(`^# TYPE ${name.replace(/_(count|sum|bucket)$/, '')} `, 'm').test(text)) {
    throw new Error(`no metric family for ${name} in /metrics`);
  }
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) got[pair[1]!] = pair[2]!;
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) {
      sum += Number(m[3]);
    }
  }
  return sum;
}

/** Starts the real sidecar (`startSidecar`) in front of `upstreamUrl`, with `BASE_FLAGS` overridden by `flags`. */
export async function startTestSidecar(
  upstreamUrl: string,
  flags: Record<string, string | undefined> = {},
  deps: { now?: () => number; logger?: Logger } = {},
): Promise<TestSidecar> {
  // A flag set to undefined removes a base flag (e.g. `'api-key': undefined` with `--api-key-file`).
  const merged = Object.fromEntries(
    Object.entries({ ...BASE_FLAGS, 'upstream-url': upstreamUrl, ...flags }).filter((e): e is [string, string] => e[1] !== undefined),
  );
  const config = loadServeConfig(merged, {});
  const handle = await startSidecar(config, { logger: deps.logger ?? silentLogger(), ...(deps.now ? { now: deps.now } : {}) });
  const decision = handle.urls.decision;
  // `--listen unix:/path`: the app's pool reaches the socket.
  const app = decision.startsWith('unix:') ? new Pool('http://localhost', { socketPath: decision.slice('unix:'.length) }) : new Pool(decision);
  const admin = new Pool(handle.urls.admin);
  let closed = false;
  const t: TestSidecar = {
    handle,
    check: (body, headers) => call(app, 'POST', '/v1/authorization/check', typeof body === 'string' ? body : JSON.stringify(body), headers),
    send: (method, path, opts = {}) => call(app, method, path, opts.body, opts.headers),
    admin: (path) => call(admin, 'GET', path),
    metricsText: async () => (await call(admin, 'GET', '/metrics')).text,
    metric: async (name, labels) => sampleOf(await t.metricsText(), name, labels),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.allSettled([app.close(), admin.close()]);
      await handle.close();
    },
  };
  return t;
}

/** A JSON logger (the production one) whose lines a test can read. */
export function capturingLogger(level: 'debug' | 'info' | 'warn' = 'info'): { logger: Logger; lines: () => Record<string, unknown>[]; raw: () => string } {
  const out: string[] = [];
  const logger = createLogger(level, { write: (line: string) => void out.push(line) });
  return {
    logger,
    raw: () => out.join(''),
    lines: () =>
      out
        .join('')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** The scripted service and the sidecar in front of it, for one test (see {@link useSidecar}). */
export interface SidecarFixture {
  /**
   * Starts the scripted service answering `reply`, then the real sidecar in front of it
   * (`BASE_FLAGS` overridden by `flags`); both are closed after the test.
   */
  start(reply?: Reply | ReplyFn, flags?: Record<string, string | undefined>, deps?: { now?: () => number; logger?: Logger }): Promise<{ u: ScriptedUpstream; s: TestSidecar }>;
  /** The running pair, once started in this test. */
  readonly upstream: ScriptedUpstream | undefined;
  readonly sidecar: TestSidecar | undefined;
}

/**
 * A sidecar and its scripted service per test, closed after each, as `useTestRedis()` does for
 * Redis: the setup and teardown the decision tests used to repeat in each file.
 *
 * @example
 * const fx = useSidecar();
 * it('…', async () => { const { u, s } = await fx.start({ body: allow('k', Date.now() + 60_000) }); … });
 */
export function useSidecar(): SidecarFixture {
  let upstream: ScriptedUpstream | undefined;
  let sidecar: TestSidecar | undefined;
  afterEach(async () => {
    await sidecar?.close();
    await upstream?.close();
    sidecar = upstream = undefined;
  });
  return {
    async start(reply = { status: 200, body: {} }, flags = {}, deps = {}) {
      upstream = await startUpstream(reply);
      sidecar = await startTestSidecar(upstream.url, flags, deps);
      return { u: upstream, s: sidecar };
    },
    get upstream() {
      return upstream;
    },
    get sidecar() {
      return sidecar;
    },
  };
}
