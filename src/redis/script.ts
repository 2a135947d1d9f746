import { createHash } from 'node:crypto';
import { ErrorReply } from '@redis/client';
import type { RedisCommands } from './commands.js';

/**
 * A Lua script run with `EVALSHA`, falling back to `EVAL` (which also loads it) when Redis answers
 * `NOSCRIPT` (after a restart, a failover or `SCRIPT FLUSH`). Used inside {@link RedisConnection.call},
 * so the deadline covers both tries.
 *
 * @example
 * const get = new RedisScript('return redis.call("GET", KEYS[1])');
 * await conn.call('get', (c) => get.run(c, ['k'], []));
 */
export class RedisScript {
  readonly sha: string;

  constructor(readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(client: RedisCommands, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args];
    try {
      return await client.sendCommand(['EVALSHA', this.sha, ...tail]);
    } catch (err) {
      if (!(err instanceof ErrorReply) || !err.message.startsWith('NOSCRIPT')) throw err;
      return client.sendCommand(['EVAL', this.source, ...tail]);
    }
  }
}
