import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PATIENTLY } from '../helpers/wait.js';
import { cliEntry } from '../helpers/cli.js';

// Issue 8, item 2, proven once for real: a running `serve` process whose wall clock is stepped back
// one hour (libfaketime, monotonic clock left alone) must stop serving a cached ALLOW by validUntil.

const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const KEY = 'flow-clock';

let child: ChildProcess | undefined;
let upstream: Server | undefined;
let dir: string | undefined;
afterEach(async () => {
  child?.kill('SIGKILL');
  await new Promise((r) => (upstream ? upstream.close(r) : r(undefined)));
  if (dir) rmSync(dir, { recursive: true, force: true });
  child = upstream = dir = undefined;
});

describe('a wall clock stepped back one hour (libfaketime on a real serve process)', () => {
  it('never serves a cached ALLOW after validUntil', async () => {
    // Never a skip: without libfaketime this proof cannot run, and that is a failure.
    expect(existsSync(FAKETIME_LIB), `${FAKETIME_LIB} is missing: install Debian's faketime package (bash test/setup.sh, or apt-get install faketime)`).toBe(true);

    // Set when the service answers, not before serve starts: under load starting serve took long enough for an ALLOW dated at the start to arrive expired.
    let validUntil = Number.POSITIVE_INFINITY;
    let checks = 0;
    upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        checks++;
        // The first check gets the ALLOW; any later one finds the service failing, so an ALLOW
        // can only come from the cache.
        if (checks === 1) {
          validUntil = Date.now() + 5_000;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ decision: 'ALLOW', configKey: KEY, validUntil }));
        } else {
          res.writeHead(500);
          res.end();
        }
      });
    });
    await new Promise<void>((r) => upstream!.listen(0, '127.0.0.1', r));

    dir = mkdtempSync(join(tmpdir(), 'clock-step-'));
    const stepFile = join(dir, 'faketime');
    writeFileSync(stepFile, '+0\n');
    child = spawn(
      process.execPath,
      [...cliEntry(), 'serve', '--upstream-url', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, '--api-key', 'k', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--cache-safety-margin-ms', '0', '--redec-reconcile-interval-ms', '0', '--api-key-check', 'off'],
      {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          LD_PRELOAD: FAKETIME_LIB,
          FAKETIME_TIMESTAMP_FILE: stepFile,
          FAKETIME_NO_CACHE: '1',
          DONT_FAKE_MONOTONIC: '1',
        },
      },
    );
    const decisionUrl = await new Promise<string>((resolve, reject) => {
      let out = '';
      child!.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        const m = /"decision":"(http:\/\/[^"]+)"/.exec(out);
        if (m) resolve(m[1]!);
      });
      child!.on('exit', (code) => reject(new Error(`serve exited ${code} before it started:\n${out}`)));
    });

    const check = async () => {
      const res = await request(`${decisionUrl}/v1/authorization/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userReference: 'u', configKey: KEY }),
      });
      const json = (await res.body.json()) as { decision: string };
      return { decision: json.decision, source: res.headers['x-consent-decision-source'], date: Date.parse(String(res.headers.date)) };
    };

    const first = await check();
    expect(first).toMatchObject({ decision: 'ALLOW', source: 'upstream' });
    writeFileSync(stepFile, '-3600\n');
    // The sidecar's own Date header (node:http refreshes it once a second) shows the step took.
    let stepped = await check();
    await vi.waitFor(async () => {
      stepped = await check();
      expect(Date.now() - stepped.date, 'the serve process clock was not stepped back by libfaketime').toBeGreaterThan(3_500_000);
    }, { ...PATIENTLY, interval: 100 });
    expect(stepped).toMatchObject({ decision: 'ALLOW', source: 'cache' });

    // Ask, a check every 100 ms or so, from validUntil until at least 3 s past it and at least six
    // answers asked after it: however slow the machine, the window is covered.
    const lateAnswers: { sentAt: number; decision: string; source: unknown }[] = [];
    while (Date.now() < validUntil + 3_000 || lateAnswers.length < 6) {
      const sentAt = Date.now();
      const r = await check();
      if (sentAt >= validUntil) lateAnswers.push({ sentAt, decision: r.decision, source: r.source });
      await pause(100);
    }
    // Before the fix: ALLOW from the cache for the whole hour the clock was stepped back.
    expect(lateAnswers.filter((a) => a.decision === 'ALLOW'), 'ALLOWs served after validUntil').toEqual([]);
  }, 30_000);
});
