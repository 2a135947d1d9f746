/**
 * What `/readyz` reports: ready once configuration and secrets are loaded and every listener is
 * up; not ready again once shutdown begins. It never depends on the service being reachable (a
 * dead service is the breaker's business, and an unready pod would only cut the app off the
 * fail-closed answers it needs).
 */
export class Readiness {
  private readonly pending = new Set<string>();
  private draining = false;

  /** Declares a condition that must be met before ready. */
  require(name: string): void {
    this.pending.add(name);
  }

  satisfy(name: string): void {
    this.pending.delete(name);
  }

  startDraining(): void {
    this.draining = true;
  }

  get ready(): boolean {
    return !this.draining && this.pending.size === 0;
  }

  /** Why not ready, for the probe's body. */
  get reasons(): string[] {
    return this.draining ? ['shutting down'] : [...this.pending].map((p) => `waiting for ${p}`);
  }
}
