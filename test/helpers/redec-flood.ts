import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sampleOf } from './sidecar.js';

/**
 * A consent service whose REDEC listing is `totalBytes` long (1 GB by default), generated on the
 * fly (nothing of it is held), in one of the shapes an attacker on the service's path would use.
 * Every other request gets 404. Used by test/e2e/redec-listing-flood.test.ts and the bench
 * test/bench/redec-listing-rss.ts (issue 20).
 *
 * - `one-page`: one page of `totalBytes`, chunked, records of ~100 bytes, never a `nextCursor`;
 * - `small-records`: pages just under 8 MiB of ~100-byte records, `nextCursor` to the next;
 * - `big-records`: pages just under 8 MiB holding one record each (a string of ~8 MiB);
 * - `realistic`: pages of 100 records of ~600 bytes, as many as `totalBytes` makes.
 */
export type FloodShape = 'one-page' | 'small-records' | 'big-records' | 'realistic';

export interface FloodService {
  readonly url: string;
  /** Listing bytes written so far (all requests). */
  readonly written: () => number;
  /** Listing requests received. */
  readonly requests: () => number;
  close(): Promise<void>;
}

const PAGE_BYTES = 8 * 1024 * 1024 - 4096;

function smallRecord(i: number): string {
  return JSON.stringify({ id: `nrq_${i.toString().padStart(10, '0')}`, redecConsentId: `rdc_${i}`, status: 'pending', reason: 'grant' });
}

function realisticRecord(i: number): string {
  return JSON.stringify({
    notificationRequirementId: `nrq_${i.toString().padStart(10, '0')}`,
    redecConsentId: `rdc_${i.toString().padStart(10, '0')}`,
    internalConsentCode: `icc_${i}`,
    customerTenantId: `customer-${i}@tenant.example`,
    consentActionId: `cac_${i.toString().padStart(12, '0')}`,
    notificationReason: i % 3 === 0 ? 'revoke' : 'grant',
    deliveryResponsibility: 'tenant',
    channelPolicy: 'tenant_determined',
    channel: 'digital',
    grantedAt: 1767225600000 + i,
    initialAccessValidUntil: 1798761600000 + i,
    finalityCode: 'FIN-042',
    objectiveCodes: ['OBJ-1', 'OBJ-7', 'OBJ-12'],
    mediumCode: 'MED-3',
    status: 'pending',
    createdAt: 1767225600000 + i,
    padding: 'p'.repeat(40),
  });
}

/** Writes `parts()` until it returns null or the client goes away, respecting backpressure. */
function pump(res: ServerResponse, next: () => string | null, count: (n: number) => void): void {
  const go = (): void => {
    while (!res.destroyed) {
      const part = next();
      if (part === null) {
        res.end();
        return;
      }
      count(part.length);
      if (!res.write(part)) {
        res.once('drain', go);
        return;
      }
    }
  };
  go();
}

export async function startFloodService(shape: FloodShape, totalBytes = 1024 ** 3): Promise<FloodService> {
  let written = 0;
  let requests = 0;
  const count = (n: number): void => void (written += n);
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/v1/redec/notification-requirements') {
      res.writeHead(404).end();
      return;
    }
    requests++;
    const page = Number(url.searchParams.get('cursor') ?? '0');
    res.writeHead(200, { 'content-type': 'application/json' });
    if (shape === 'one-page') {
      let i = 0;
      let sent = 0;
      let done = false;
      pump(res, () => {
        if (done) return null;
        if (sent >= totalBytes) {
          done = true;
          return '],"nextCursor":null}';
        }
        let s = i === 0 ? '{"items":[' : '';
        for (let n = 0; n < 500; n++, i++) s += `${i === 0 ? '' : ','}${smallRecord(i)}`;
        sent += s.length;
        return s;
      }, count);
      return;
    }
    const perPage = shape === 'realistic' ? 100 * realisticRecord(0).length : PAGE_BYTES;
    const pages = Math.max(1, Math.floor(totalBytes / perPage));
    const nextCursor = page + 1 < pages ? JSON.stringify(String(page + 1)) : 'null';
    if (shape === 'big-records') {
      let step = 0;
      const blob = 'b'.repeat(64 * 1024);
      const blobs = Math.floor((PAGE_BYTES - 200) / blob.length);
      pump(res, () => {
        step++;
        if (step === 1) return `{"items":[{"id":"nrq_${page}","blob":"`;
        if (step <= blobs + 1) return blob;
        if (step === blobs + 2) return `"}],"nextCursor":${nextCursor}}`;
        return null;
      }, count);
      return;
    }
    const make = shape === 'realistic' ? realisticRecord : smallRecord;
    const recordsPerPage = shape === 'realistic' ? 100 : Math.floor(PAGE_BYTES / (smallRecord(0).length + 1));
    let n = 0;
    let closed = false;
    pump(res, () => {
      if (closed) return null;
      if (n >= recordsPerPage) {
        closed = true;
        return `],"nextCursor":${nextCursor}}`;
      }
      let s = n === 0 ? '{"items":[' : '';
      for (let k = 0; k < 200 && n < recordsPerPage; k++, n++) s += `${n === 0 ? '' : ','}${make(page * recordsPerPage + n)}`;
      return s;
    }, count);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    written: () => written,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An app that counts what it is handed. */
export async function startCountingApp(): Promise<{ url: string; received: () => number; close(): Promise<void> }> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`,
    received: () => received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A real `serve` (the build, `dist/cli.js`) reconciling against `upstreamUrl` once at start, handing to `appUrl`. */
export interface ServeProcess {
  readonly child: ChildProcess;
  /** `/metrics` of the admin listener. */
  metrics(): Promise<string>;
  /** Peak resident set size so far (VmHWM of /proc/<pid>/status), bytes. */
  peakRssBytes(): number;
  /** Resident set size now (VmRSS), bytes. */
  rssBytes(): number;
  /** Log lines (JSON) printed so far. */
  lines(): Record<string, unknown>[];
  stop(): Promise<void>;
}

function procStatus(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

export async function startServe(upstreamUrl: string, appUrl: string, extra: string[] = []): Promise<ServeProcess> {
  const args = [
    'dist/cli.js', 'serve',
    '--upstream-url', upstreamUrl,
    '--api-key', 'flood-key',
    '--listen', '127.0.0.1:0',
    '--admin-listen', '127.0.0.1:0',
    '--webhook-listen', '127.0.0.1:0',
    '--app-webhook-url', appUrl,
    '--webhook-secret', 'whsec_flood_0123456789',
    '--redec-reconcile-grace-ms', '0',
    '--redec-reconcile-interval-ms', '3600000',
    '--upstream-timeout-ms', '120000',
    '--shutdown-timeout-ms', '1000',
    ...extra,
  ];
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const lines = (): Record<string, unknown>[] =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const admin = await new Promise<string>((resolve, reject) => {
    const look = (): void => {
      const started = lines().find((l) => l.event === 'started') as { urls?: { admin?: string } } | undefined;
      if (started?.urls?.admin) {
        child.stdout!.off('data', look);
        resolve(started.urls.admin);
      }
    };
    child.stdout!.on('data', look);
    void exited.then((code) => reject(new Error(`serve exited ${code} before it started:\n${out}\n${err}`)));
  });
  return {
    child,
    metrics: async () => (await fetch(`${admin}/metrics`)).text(),
    peakRssBytes: () => procStatus(child.pid!, 'VmHWM'),
    rssBytes: () => procStatus(child.pid!, 'VmRSS'),
    lines,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The runs counter of one outcome in a `/metrics` text. */
export const runsOf = (text: string, outcome: string): number => sampleOf(text, 'consent_sidecar_redec_reconcile_runs_total', { outcome });
