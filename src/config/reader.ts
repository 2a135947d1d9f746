import { parseListenAddress, type ListenAddress } from '../lib/listen-address.js';
import { envName } from './option-spec.js';
import { fileSecret, staticSecret, type Secret, type SecretParser } from './secret.js';

/** Raw values as commander parsed them, keyed by long flag name without dashes. */
export type RawFlags = Readonly<Record<string, string | readonly string[] | boolean | undefined>>;
/** Environment variables (defaults to `process.env` inside `src/config/` only). */
export type RawEnv = Readonly<Record<string, string | undefined>>;

/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Reads raw flags and variables, collecting every problem before failing, so one run of
 * `serve` tells the operator all that is wrong. Each problem names the flag (and the variable
 * when the value came from it).
 */
export class Reader {
  readonly problems: string[] = [];

  constructor(
    private readonly flags: RawFlags,
    private readonly env: RawEnv,
  ) {}

  /** `--name` or `--name (from CONSENT_SIDECAR_NAME)`. */
  private label(name: string, fromEnv: boolean): string {
    return fromEnv ? `--${name} (from ${envName(name)})` : `--${name}`;
  }

  raw(name: string): { value: string; label: string } | undefined {
    const flag = this.flags[name];
    if (typeof flag === 'string') return { value: flag, label: this.label(name, false) };
    if (Array.isArray(flag) && flag.length > 0) return { value: flag.join('\n'), label: this.label(name, false) };
    const env = this.env[envName(name)];
    if (env !== undefined && env !== '') return { value: env, label: this.label(name, true) };
    return undefined;
  }

  list(name: string): { values: string[]; label: string } | undefined {
    const flag = this.flags[name];
    if (Array.isArray(flag) && flag.length > 0) return { values: [...flag], label: this.label(name, false) };
    if (typeof flag === 'string') return { values: [flag], label: this.label(name, false) };
    const env = this.env[envName(name)];
    if (env !== undefined && env.trim() !== '') {
      return { values: env.split(/[\n,]/).map((s) => s.trim()).filter(Boolean), label: this.label(name, true) };
    }
    return undefined;
  }

  problem(label: string, message: string): void {
    this.problems.push(`${label}: ${message}`);
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.raw(name);
    if (!raw) return fallback;
    const text = raw.value.trim();
    const n = /^-?\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      this.problem(raw.label, `must be an integer from ${min} to ${max}, got "${raw.value}"`);
      return fallback;
    }
    return n;
  }

  url(name: string, required: boolean): URL | null {
    const raw = this.raw(name);
    if (!raw) {
      if (required) this.problem(`--${name}`, `is required (or set ${envName(name)})`);
      return null;
    }
    try {
      const url = new URL(raw.value);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        this.problem(raw.label, `must be an http:// or https:// URL, got "${raw.value}"`);
        return null;
      }
      if (url.username || url.password) {
        this.problem(raw.label, 'must not carry credentials; use the key or secret flags');
        return null;
      }
      return url;
    } catch {
      this.problem(raw.label, `is not a valid URL: "${raw.value}"`);
      return null;
    }
  }

  listen(name: string, fallback: string, unix = false): ListenAddress {
    const raw = this.raw(name);
    const parsed = parseListenAddress(raw?.value ?? fallback, { unix });
    if (typeof parsed === 'string') {
      this.problem(raw?.label ?? `--${name}`, parsed);
      return { host: '127.0.0.1', port: 0 };
    }
    return parsed;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.raw(name);
    if (!raw) return fallback;
    if ((allowed as readonly string[]).includes(raw.value)) return raw.value as T;
    this.problem(raw.label, `must be one of ${allowed.join(', ')}, got "${raw.value}"`);
    return fallback;
  }

  /**
   * A secret given as `--name` or `--name-file`, exactly one. Returns null when neither is set
   * (the caller decides whether that is a problem).
   */
  secret<T>(name: string, parse: SecretParser<T>, asList = false): Secret<T> | null {
    const fileName = `${name}-file`;
    const valueRaw = asList ? this.list(name) : this.raw(name);
    const fileRaw = this.raw(fileName);
    if (valueRaw && fileRaw) {
      this.problem(`--${name}`, `give the secret as --${name} or --${fileName}, not both`);
      return null;
    }
    if (fileRaw) {
      const secret = fileSecret(fileRaw.value, `--${fileName}`, parse);
      if (typeof secret === 'string') {
        this.problem(fileRaw.label, secret);
        return null;
      }
      return secret;
    }
    if (valueRaw) {
      const text = 'values' in valueRaw ? valueRaw.values.join('\n') : valueRaw.value;
      const parsed = parse(text);
      if ('error' in parsed) {
        this.problem(valueRaw.label, parsed.error);
        return null;
      }
      return staticSecret(parsed.value, `--${name}`);
    }
    return null;
  }
}

