import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppRoutes, globMatcher, globsForward } from '../../src/webhooks/index.js';

/**
 * The routes by event type (contract, Webhooks): the first `--app-webhook-route` that matches, then
 * an `--app-webhook-ignore` glob, then the default (`--app-webhook-url`); with none of them the
 * event is unrouted. `globsForward` is how another replica reads this table (queue mode hands an
 * entry to a replica whose routes take it): it must say what the table itself does.
 */
const url = (n: number): URL => new URL(`http://127.0.0.1:${8000 + n}/hooks`);

describe('globMatcher', () => {
  it.each([
    ['data_subject_request.*', 'data_subject_request.created', true],
    ['data_subject_request.*', 'data_subject_request.', true],
    ['data_subject_request.*', 'data_subject_requestXcreated', false],
    ['*.created', 'consent_action.created', true],
    ['redec.notification.required', 'redec.notification.required', true],
    ['redec.notification.required', 'redec.notification.required.v2', false],
    ['*', 'anything', true],
    ['a*b*c', 'aXbYc', true],
    ['a*b*c', 'aXbY', false],
  ])('%s against %s: %s', (glob, type, matches) => {
    expect(globMatcher(glob)(type)).toBe(matches);
  });
});

describe('AppRoutes', () => {
  it('a route first (in order), then an ignore, then the default', () => {
    const routes = new AppRoutes(
      [
        { glob: 'redec.access.failed', url: url(1) },
        { glob: 'redec.*', url: url(2) },
      ],
      url(3),
      ['redec.access.*', 'internal.*'],
    );
    expect(routes.route('redec.access.failed')).toMatchObject({ kind: 'forward', target: { label: 'redec.access.failed' } });
    // A route that matches comes before an ignore that matches too.
    expect(routes.route('redec.access.occurred')).toMatchObject({ kind: 'forward', target: { label: 'redec.*' } });
    expect(routes.route('internal.tick')).toEqual({ kind: 'ignored', glob: 'internal.*' });
    expect(routes.pick('internal.tick')).toBeNull();
    expect(routes.route('consent_action.created')).toMatchObject({ kind: 'forward', target: { label: 'default' } });
    expect(routes.labels).toEqual(['redec.access.failed', 'redec.*', 'default']);
    expect(routes.globs).toEqual({ routes: ['redec.access.failed', 'redec.*'], ignore: ['redec.access.*', 'internal.*'], fallback: true });
  });

  it('without a default, a type no route takes and no ignore names is unrouted', () => {
    const routes = new AppRoutes([{ glob: 'consent_action.*', url: url(1) }], null, ['internal.*']);
    expect(routes.route('newtype.created')).toEqual({ kind: 'unrouted' });
    expect(routes.pick('newtype.created')).toBeNull();
    expect(routes.route('internal.x')).toEqual({ kind: 'ignored', glob: 'internal.*' });
    expect(routes.labels).toEqual(['consent_action.*']);
  });

  it('another replica reads a table the way the table routes: forwarded exactly when its own route() forwards', () => {
    const glob = fc.stringMatching(/^[ab.*]{1,5}$/);
    const type = fc.stringMatching(/^[ab.]{0,6}$/);
    fc.assert(
      fc.property(fc.uniqueArray(glob, { maxLength: 4 }), fc.uniqueArray(glob, { maxLength: 3 }), fc.boolean(), type, (routeGlobs, ignore, fallback, t) => {
        const routes = new AppRoutes(
          routeGlobs.map((g, i) => ({ glob: g, url: url(i) })),
          fallback ? url(99) : null,
          ignore,
        );
        expect(globsForward(routes.globs, t)).toBe(routes.route(t).kind === 'forward');
      }),
      { numRuns: 500 },
    );
  });
});
