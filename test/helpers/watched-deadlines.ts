import { DeadlineQueue } from '../../src/lib/deadline-queue.js';

/**
 * A real {@link DeadlineQueue} whose entries the test can see: one left behind after its work ended
 * would fire (answer, and count, a call again) when its deadline passed.
 */
export class WatchedDeadlines extends DeadlineQueue {
  readonly live = new Set<unknown>();

  override add(e: Parameters<DeadlineQueue['add']>[0]): void {
    this.live.add(e);
    super.add(e);
  }

  override remove(e: Parameters<DeadlineQueue['remove']>[0]): void {
    this.live.delete(e);
    super.remove(e);
  }
}
