/** What every caller of `RedisConnection.call` gets: one command at a time, routed to the deployment's slot. */
export interface RedisCommands {
  sendCommand(args: readonly string[]): Promise<unknown>;
}
