import { access, constants, copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, mustFind, render, run, vendoredExampleChart, type K8sObject } from '../helpers/helm.js';
import { MONITORING_API, SCENARIOS, valuesPath } from './scenarios.js';
import { declaredMetricFamilies } from '../helpers/metric-families.js';

const RULE_TESTS = join(ROOT, 'test/packaging/consent-sidecar.rules.test.yaml');
const INSTALL_HINT =
  'promtool is required for the alert tests and was not found on PATH. Install it with ' +
  '`apt-get update && apt-get install -y --no-install-recommends prometheus` (Debian package; gives /usr/bin/promtool).';

/** promtool on PATH, or a failure that says how to install it (never a skip). */
async function promtool(): Promise<string> {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, 'promtool');
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error(INSTALL_HINT);
}

interface Rule {
  alert?: string;
  expr: string;
}
const rulesOf = (o: K8sObject): Rule[] => (o.spec as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

/**
 * Rules each monitored render holds: 5 always (down, pre-evaluation denials, fail-closed rate,
 * breaker, secret reloads), 3 with webhooks, 2 more in queue mode, 2 with Redis, 1 with the REDEC
 * reconciler (on with webhooks unless turned off).
 */
const RULES_BY_ORIGIN: Record<string, number> = {
  'monitoring-forced-values.yaml': 14,
  'monitoring-on-values.yaml': 14,
  'include-values.yaml': 5,
  example: 9,
};

let work: string;
/** Every PrometheusRule the scenarios and the example render, by origin. */
const ruleObjects = new Map<string, K8sObject>();

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'consent-sidecar-rules-'));
  const monitored = SCENARIOS.filter((s) => s.monitoring);
  const example = await vendoredExampleChart();
  try {
    const renders = await Promise.all([
      ...monitored.map(async (s) => [s.file, await render({ valuesFiles: [valuesPath(s)], apiVersions: s.apiVersions })] as const),
      (async () => ['example', await render({ chart: example.dir, apiVersions: [MONITORING_API] })] as const)(),
    ]);
    for (const [origin, objects] of renders) ruleObjects.set(origin, mustFind(objects, 'PrometheusRule'));
  } finally {
    await example.cleanup();
  }
  // The unit tests are written against the forced scenario's rules (release and namespace "shop").
  // JSON is YAML, so the rule file promtool reads is the rendered spec as JSON.
  await writeFile(join(work, 'rules.yaml'), JSON.stringify(ruleObjects.get('monitoring-forced-values.yaml')!.spec, null, 2));
  await copyFile(RULE_TESTS, join(work, 'consent-sidecar.rules.test.yaml'));
}, 60_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('alerting rules', () => {
  it('promtool is installed', async () => {
    await expect(promtool()).resolves.toMatch(/promtool$/);
  });

  it('promtool check rules accepts the rules of every monitored scenario and of the example chart', async () => {
    const bin = await promtool();
    expect([...ruleObjects.keys()].sort()).toEqual([...SCENARIOS.filter((s) => s.monitoring).map((s) => s.file), 'example'].sort());
    for (const [origin, object] of ruleObjects) {
      const file = join(work, `check-${origin}.yaml`);
      await writeFile(file, JSON.stringify(object.spec, null, 2));
      const result = await run(bin, ['check', 'rules', file]);
      expect(result.code, `${origin}: ${result.stdout}${result.stderr}`).toBe(0);
      // 14 alerts with every feature on. Each renders only where its feature is on (a feature that is
      // off exports no series to alert on), so a scenario without webhooks, Redis or the reconciler
      // has fewer: see RULES_BY_ORIGIN.
      expect(result.stdout, origin).toContain(`SUCCESS: ${RULES_BY_ORIGIN[origin]} rules found`);
    }
  });

  it('promtool test rules: every alert fires when it should and stays quiet when it should not', async () => {
    const bin = await promtool();
    const result = await run(bin, ['test', 'rules', 'consent-sidecar.rules.test.yaml'], work);
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toContain('SUCCESS');
  });

  it('the unit tests cover every alert the chart defines', async () => {
    const tests = await readFile(RULE_TESTS, 'utf8');
    const alerts = rulesOf(ruleObjects.get('monitoring-forced-values.yaml')!).map((r) => r.alert);
    for (const alert of alerts) expect(tests, `${alert} has no promtool test`).toContain(`alertname: ${alert}`);
  });

  it('the rules use only metric families the sidecar declares', async () => {
    const declared = await declaredMetricFamilies();
    const used = new Set<string>();
    for (const rule of rulesOf(ruleObjects.get('monitoring-forced-values.yaml')!)) {
      for (const m of rule.expr.matchAll(/\bconsent_sidecar_[a-z_]+/g)) used.add(m[0]);
    }
    expect(used.size).toBeGreaterThanOrEqual(6);
    expect([...used].filter((name) => !declared.has(name))).toEqual([]);
  });
});
