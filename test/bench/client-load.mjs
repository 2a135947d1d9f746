// One client's checks in a closed loop, in a process of its own (so its CPU is its own):
//   node client-load.mjs <client module> <baseUrl> <concurrency> <durationS>
// Imports ConsentClient from the module (an ES module file), warms up for a second, then keeps
// `concurrency` checks in flight for `durationS` and prints one JSON line: checks done, how many
// were not allowed (each should be an ALLOW from the cache), this process's CPU time over the timed
// part (user + system, µs) and the latencies' median and p99 (ms).
import { pathToFileURL } from 'node:url';

const [modulePath, baseUrl, concurrencyText, durationText] = process.argv.slice(2);
const { ConsentClient } = await import(pathToFileURL(modulePath).href);
const concurrency = Number(concurrencyText);
const client = new ConsentClient({ baseUrl, connections: concurrency });
const input = { userReference: 'alice', configKey: 'marketing-email' };

async function loop(untilMs, latencies, counts) {
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < untilMs) {
        const started = performance.now();
        const r = await client.check(input);
        latencies?.push(performance.now() - started);
        counts.done++;
        if (!r.allowed) counts.bad++;
      }
    }),
  );
}

await loop(performance.now() + 1000, null, { done: 0, bad: 0 });
const latencies = [];
const counts = { done: 0, bad: 0 };
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await loop(t0 + Number(durationText) * 1000, latencies, counts);
const elapsedS = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
await client.close();
latencies.sort((a, b) => a - b);
const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? Number.NaN;
console.log(JSON.stringify({ done: counts.done, bad: counts.bad, elapsedS, cpuUs: cpu.user + cpu.system, p50: q(0.5), p99: q(0.99) }));
