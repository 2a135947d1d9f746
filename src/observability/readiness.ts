/**
 * What `/readyz` reports: ready once configuration and secrets are loaded and every listener is
 * up; not ready again once shutdown begins. It never depends on the service being reachable (a
 * dead service is the breaker's business, and an unready pod would only cut the app off the
 * fail-closed answers it needs).
 */
export class Readiness {
  private readonly pending = new Set<string>();
  private draining = false;
  private readonly listeners = new Set<(ready: boolean) => void>();

  /** Declares a condition that must be met before ready. */
  require(name: string): void {
    this.change(() => this.pending.add(name));
  }

  satisfy(name: string): void {
    this.change(() => this.pending.delete(name));
  }

  startDraining(): void {
    this.change(() => (this.draining = true));
  }

  /** Calls `listener` with the new state each time `ready` changes; returns its removal. */
  onChange(listener: (ready: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  private change(update: () => unknown): void {
    const before = this.ready;
    update();
    if (this.ready === before) return;
    for (const l of [...this.listeners]) {
      try {
        l(this.ready);
      } catch {
        // A listener's failure is its own; the state has changed all the same.
      }
    }
  }

  get ready(): boolean {
    return !this.draining && this.pending.size === 0;
  }

  /** Why not ready, for the probe's body. */
  get reasons(): string[] {
    return this.draining ? ['shutting down'] : [...this.pending].map((p) => `waiting for ${p}`);
  }
}
