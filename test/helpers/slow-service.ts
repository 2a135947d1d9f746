import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./slow-service-child.mjs', import.meta.url));

/** What the slow service has seen so far. */
export interface SlowServiceStats {
  /** The userReference of every check whose request the service received, in arrival order. */
  readonly received: readonly string[];
  /** Checks it answered (ALLOW after its delay). */
  readonly answered: number;
}

/** A consent service in its own process answering every check ALLOW after `delayMs` (test/helpers/slow-service-child.mjs). */
export interface SlowService {
  readonly url: string;
  stats(): Promise<SlowServiceStats>;
  close(): Promise<void>;
}

/** Starts {@link SlowService} on a free loopback port; its load never shares the test's event loop. */
export async function startSlowService(delayMs: number): Promise<SlowService> {
  const child: ChildProcess = spawn(process.execPath, [CHILD, String(delayMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line !== undefined && out.includes('\n')) resolve((JSON.parse(line) as { port: number }).port);
    });
    child.once('exit', (code) => reject(new Error(`the slow service exited ${code} before it listened`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    async stats() {
      const res = await fetch(`${url}/stats`);
      return (await res.json()) as SlowServiceStats;
    },
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
