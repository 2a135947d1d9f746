import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

/** Parses a secret's text; returns the value or an error message. */
export type SecretParser<T> = (text: string) => { value: T } | { error: string };

/** What a file-backed secret reports while it is watched. Never carries the secret itself. */
export interface SecretEvent {
  readonly kind: 'reloaded' | 'reload_failed';
  readonly origin: string;
  readonly detail?: string;
}

/**
 * A secret given as a value or as a file. Files are re-read every `intervalMs` once {@link watch}
 * is called, because mounted Kubernetes Secrets rotate by swapping a symlink (content polling is the
 * one method that sees every swap). A failed or invalid re-read keeps the last good value.
 */
export interface Secret<T> {
  /** The current value; cheap, safe on hot paths. */
  current(): T;
  /** `--flag` or `--flag-file (path)`, for messages; never the value. */
  readonly origin: string;
  /** Starts polling (files only); idempotent. */
  watch(intervalMs: number, onEvent: (event: SecretEvent) => void): void;
  /** Stops polling. */
  close(): void;
}

export function staticSecret<T>(value: T, origin: string): Secret<T> {
  return {
    current: () => value,
    origin,
    watch: () => undefined,
    close: () => undefined,
  };
}

/**
 * Reads `path` now (throwing a message on failure, for configuration to collect) and returns a
 * secret that can later follow the file.
 */
export function fileSecret<T>(path: string, origin: string, parse: SecretParser<T>): Secret<T> | string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
  }
  const first = parse(text);
  if ('error' in first) return `${path}: ${first.error}`;

  let value = first.value;
  let lastText = text;
  let timer: NodeJS.Timeout | undefined;
  let reading = false;

  const poll = async (onEvent: (event: SecretEvent) => void): Promise<void> => {
    if (reading) return;
    reading = true;
    try {
      const next = await readFile(path, 'utf8');
      if (next === lastText) return;
      const parsed = parse(next);
      if ('error' in parsed) {
        onEvent({ kind: 'reload_failed', origin, detail: parsed.error });
        return;
      }
      lastText = next;
      value = parsed.value;
      onEvent({ kind: 'reloaded', origin });
    } catch (err) {
      onEvent({ kind: 'reload_failed', origin, detail: (err as NodeJS.ErrnoException).code ?? 'read error' });
    } finally {
      reading = false;
    }
  };

  return {
    current: () => value,
    origin,
    watch(intervalMs, onEvent) {
      if (timer) return;
      timer = setInterval(() => void poll(onEvent), intervalMs);
      timer.unref();
    },
    close() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}

/**
 * What a secret is for, from its origin flag (`--webhook-secret-file` → `webhook_secret`): the
 * bounded `secret` label of the reload metrics.
 */
export const secretRoleOf = (origin: string): string => origin.replace(/^--/, '').replace(/-file$/, '').replace(/-/g, '_');

/** Whether a secret follows a file (its origin is a `--*-file` flag) and so can fail to reload. */
export const isFileSecret = (secret: Pick<Secret<unknown>, 'origin'>): boolean => secret.origin.endsWith('-file');
