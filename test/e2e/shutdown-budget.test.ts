import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, until } from '../helpers/wait.js';
import { deliveryHeaders } from '../helpers/webhooks.js';
import { cliEntry } from '../helpers/cli.js';

// Issue 8, item 4: with --shutdown-timeout-ms 5000 and a passthrough call hanging, `serve` exited
// after 9.5 s (the pools waited for their calls). Nothing in flight may outlive the budget.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SECRET = 'whsec_shutdown-budget';
const BUDGET_MS = 1500;
/** The calls' own deadlines: ten minutes, far past any test's patience, so only the budget can end them. */
const CALL_DEADLINE_MS = 600_000;

let child: ChildProcess | undefined;
const servers: Server[] = [];
afterEach(async () => {
  child?.kill('SIGKILL');
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  child = undefined;
});

/** A server that receives requests and never answers them. */
async function hanging(): Promise<{ url: string; seen: () => number }> {
  let seen = 0;
  const server = createServer((req) => {
    seen++;
    req.resume();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen: () => seen };
}

describe('shutdown keeps to --shutdown-timeout-ms', () => {
  it('a hanging passthrough call and a hanging webhook forward do not keep `serve` alive past the budget', async () => {
    const upstream = await hanging();
    const app = await hanging();
    child = spawn(
      process.execPath,
      [...cliEntry(), 'serve', '--redec-reconcile-interval-ms', '0', '--api-key-check', 'off', '--upstream-url', upstream.url, '--api-key', 'k', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0',
        '--webhook-listen', '127.0.0.1:0', '--app-webhook-url', `${app.url}/hooks`, '--webhook-secret', SECRET,
        '--shutdown-timeout-ms', String(BUDGET_MS), '--passthrough-timeout-ms', String(CALL_DEADLINE_MS), '--webhook-forward-timeout-ms', String(CALL_DEADLINE_MS)],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const urls = await new Promise<{ decision: string; webhook: string }>((resolve, reject) => {
      let out = '';
      child!.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        const d = /"decision":"(http:\/\/[^"]+)"/.exec(out);
        const w = /"webhook":"(http:\/\/[^"]+)"/.exec(out);
        if (d && w) resolve({ decision: d[1]!, webhook: w[1]! });
      });
      child!.on('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
    });
    const exited = new Promise<number>((r) => child!.on('exit', () => r(performance.now())));

    // In flight: a passthrough call the service never answers, and a verified event the app never answers.
    void fetch(`${urls.decision}/v1/redec/notification-requirements?status=pending`).catch(() => undefined);
    const body = JSON.stringify({ id: 'evt_shutdown', sequence: 1, type: 'consent.granted', occurredAt: Date.now(), data: {} });
    void fetch(`${urls.webhook}/webhooks`, { method: 'POST', headers: deliveryHeaders(SECRET, Math.floor(Date.now() / 1000), body, 'evt_shutdown'), body }).catch(() => undefined);
    await until(() => upstream.seen() >= 1 && app.seen() >= 1, 'the passthrough call and the forward reached their servers');
    expect([upstream.seen(), app.seen()]).toEqual([1, 1]);

    const t0 = performance.now();
    child.kill('SIGTERM');
    // Before the fix the process waited out the calls' own deadlines (here ten minutes, past the test's
    // patience); exiting at all shows the budget ended them. No upper bound on the time: a busy machine
    // decides that, not the sidecar.
    const took = (await eventually(exited, 'serve exited after SIGTERM with two calls hanging')) - t0;
    // It gave the calls in flight their chance: never before the budget was spent.
    expect(took).toBeGreaterThanOrEqual(BUDGET_MS - 5);
  }, 60_000);
});
