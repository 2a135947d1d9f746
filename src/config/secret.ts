import { readFileSync, readTextFile, statFile, statSync } from '../lib/node-fs.js';

/** The secrets of a text of one secret a line (a file of secrets): lines trimmed, blank lines and `#` comments skipped. */
export function secretLines(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

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
  /** The file it follows (`--*-file`), or undefined for a value. */
  readonly path?: string;
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
    // A named pipe (or a device) would block the read, or hand over whatever its writer chooses.
    const kind = statSync(path);
    if (!kind.isFile()) return `${path}: is not a regular file (${kind.isFIFO() ? 'a named pipe' : kind.isDirectory() ? 'a directory' : 'a special file'}); a secret is read from a file`;
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
  }
  const first = parse(text);
  if ('error' in first) return `${path}: ${first.error}`;

  let value = first.value;
  let lastText = text;
  /** What the last failed re-read found (the text, or the error code): said once, not every poll. */
  let lastFailure: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let reading = false;

  const failed = (found: string, detail: string, onEvent: (event: SecretEvent) => void): void => {
    if (found === lastFailure) return;
    lastFailure = found;
    onEvent({ kind: 'reload_failed', origin, detail });
  };

  const poll = async (onEvent: (event: SecretEvent) => void): Promise<void> => {
    if (reading) return;
    reading = true;
    try {
      if (!(await statFile(path)).isFile()) return failed('\0not a file', 'is not a regular file', onEvent);
      const next = await readTextFile(path);
      if (next === lastText) {
        lastFailure = undefined;
        return;
      }
      const parsed = parse(next);
      if ('error' in parsed) return failed(next, parsed.error, onEvent);
      lastText = next;
      lastFailure = undefined;
      value = parsed.value;
      onEvent({ kind: 'reloaded', origin });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'read error';
      failed(`\0${code}`, code, onEvent);
    } finally {
      reading = false;
    }
  };

  return {
    current: () => value,
    origin,
    path,
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
