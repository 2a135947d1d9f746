/** Most distinct keys remembered before the memory is reset (bounds memory under odd input). */
const MAX_TRACKED = 10_000;

/**
 * Lets one log line per key through per interval and counts the ones held back, so a flood of
 * identical events (a dead service, a misconfigured Flow) cannot drown the logs.
 */
export class RateLimiter {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** `undefined` when this key was let through recently; else the count held back since. */
  admit(key: string): number | undefined {
    const now = this.now();
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.suppressed++;
      return undefined;
    }
    if (!seen && this.last.size >= MAX_TRACKED) this.last.clear();
    this.last.set(key, { at: now, suppressed: 0 });
    return seen?.suppressed ?? 0;
  }
}
