import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { eventually } from '../helpers/wait.js';

/**
 * A log reader that stopped reading (a stuck log shipper, a full pipe) must not stop the sidecar:
 * decisions keep being answered (log lines beyond the buffer are dropped and counted) and SIGTERM
 * still ends the process. Node writes to a pipe on stdout synchronously on Linux, which blocked the
 * event loop, and SIGTERM with it, as soon as the pipe was full.
 */
const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

describe('stdout that nobody reads', () => {
  let upstream: ScriptedUpstream;
  beforeAll(async () => {
    upstream = await startUpstream({ body: allow('k', Date.now() + 600_000) });
  });
  afterAll(() => upstream?.close());

  it('decisions are still answered and SIGTERM still ends the process', async () => {
    const child = spawn(
      process.execPath,
      [CLI, 'serve', '--upstream-url', upstream.url, '--api-key', 'k', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--decision-log', 'stdout', '--decision-log-buffer-bytes', '65536', '--redec-reconcile-interval-ms', '0', '--shutdown-timeout-ms', '1000'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      // Read until started, then never again: the pipe fills.
      const urls = await eventually(
        new Promise<{ decision: string }>((resolve) => {
          let out = '';
          const onData = (c: Buffer): void => {
            out += c.toString();
            const line = out.split('\n').find((l) => l.includes('"event":"started"'));
            if (!line) return;
            child.stdout!.off('data', onData);
            child.stdout!.pause();
            resolve((JSON.parse(line) as { urls: { decision: string } }).urls);
          };
          child.stdout!.on('data', onData);
        }),
        'serve started',
      );
      const pool = new Pool(urls.decision, { connections: 8 });
      // 3,000 decision log lines (~600 KB) against a 64 KiB pipe that is not read.
      for (let round = 0; round < 30; round++) {
        const answers = await Promise.all(
          Array.from({ length: 100 }, async () => {
            const res = await pool.request({ method: 'POST', path: '/v1/authorization/check', headers: { 'content-type': 'application/json' }, body: '{"userReference":"u","configKey":"k"}' });
            return (await res.body.json()) as { decision: string };
          }),
        );
        expect(answers.every((a) => a.decision === 'ALLOW')).toBe(true);
      }
      await pool.close();
      child.kill('SIGTERM');
      expect(await eventually(exited, 'serve to exit after SIGTERM')).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 60_000);
});
