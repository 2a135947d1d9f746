import { existsSync, statSync } from '../lib/node-fs.js';
import { dirname, join } from 'node:path';
import { Counter, Gauge, type Registry } from '../observability/prom.js';
import type { Logger } from '../observability/logger.js';
import { METRIC_PREFIX } from '../observability/registry.js';
import { isFileSecret, secretRoleOf, type Secret, type SecretEvent } from './secret.js';

/**
 * Secret file reloads, by `secret` role (`api_key`, `webhook_secret`, `webhook_required_header`, …:
 * one per flag, so the label set is bounded). A file that becomes empty, invalid or disappears keeps
 * the last good value; these say so where an alert can see it.
 */
export interface SecretMetrics {
  readonly reloadFailures: Counter<'secret'>;
  /** Epoch seconds of the last successful read (the first read at start counts). */
  readonly lastReload: Gauge<'secret'>;
}

export function createSecretMetrics(registry: Registry): SecretMetrics {
  return {
    reloadFailures: new Counter({
      name: `${METRIC_PREFIX}secret_reload_failures_total`,
      help: 'Re-reads of a secret file that failed (unreadable, empty or invalid); the last good value stays in use.',
      labelNames: ['secret'],
      registers: [registry],
    }),
    lastReload: new Gauge({
      name: `${METRIC_PREFIX}secret_last_reload_timestamp_seconds`,
      help: 'When each secret file was last read successfully (Unix seconds).',
      labelNames: ['secret'],
      registers: [registry],
    }),
  };
}

/** The secrets being followed; `close()` stops following them and releases every one. */
export interface SecretWatch {
  close(): void;
}

/**
 * Whether every user of the machine may read the secret at `path`. A Kubernetes Secret volume (its
 * `..data` beside the file) is mounted only into the containers that name it: not said for it.
 */
function worldReadable(path: string): boolean {
  try {
    if (existsSync(join(dirname(path), '..data'))) return false;
    return (statSync(path).mode & 0o004) !== 0;
  } catch {
    return false;
  }
}

/**
 * Starts following every file-backed secret: logs each reload and failure and counts them.
 * Closing the watch closes every secret given (file-backed or not).
 */
export function watchSecrets(
  secrets: readonly Secret<unknown>[],
  options: { intervalMs: number; logger: Logger; registry: Registry; now: () => number },
): SecretWatch {
  const metrics = createSecretMetrics(options.registry);
  const onEvent = (e: SecretEvent): void => {
    const secret = secretRoleOf(e.origin);
    if (e.kind === 'reloaded') metrics.lastReload.set({ secret }, options.now() / 1000);
    else metrics.reloadFailures.inc({ secret });
    options.logger[e.kind === 'reloaded' ? 'info' : 'warn'](
      { event: `secret_${e.kind}`, origin: e.origin, role: secret, detail: e.detail },
      e.kind === 'reloaded' ? 'secret reloaded' : 'secret reload failed; the last good value stays in use',
    );
  };
  for (const s of secrets) {
    if (!isFileSecret(s)) continue;
    const secret = secretRoleOf(s.origin);
    if (s.path !== undefined && worldReadable(s.path)) {
      options.logger.warn(
        { event: 'secret_file_world_readable', origin: s.origin, role: secret },
        `${s.origin}: the file is readable by every user of this machine (chmod o-r, or mount it as a Kubernetes Secret volume)`,
      );
    }
    // The series exist from the start, so increase() sees the first failure.
    metrics.reloadFailures.inc({ secret }, 0);
    metrics.lastReload.set({ secret }, options.now() / 1000);
    s.watch(options.intervalMs, onEvent);
  }
  return {
    close() {
      for (const s of secrets) s.close();
    },
  };
}
