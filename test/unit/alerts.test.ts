// Alerts' pure parts: status from a result, flap damping, which transitions
// a channel hears of, the Slack and PagerDuty payloads, the signature, and
// the channel fields (checks file and API share them).

import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseAlertChannel, parseAlertChannels } from '../../src/checks/alert-channel-fields.js';
import { parseServerChecksFile } from '../../src/checks/checks-file.js';
import { Fields } from '../../src/checks/fields.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import {
  type AlertEvent,
  channelRequest,
  errorMessage,
  PAGERDUTY_EVENTS_URL,
  pagerDutyPayload,
  signature,
  slackPayload,
  tlsOf,
} from '../../src/server/alert-payloads.js';
import { notice, overallStatus, resultStatus, step } from '../../src/server/alert-status.js';
import type { AlertChannel, CheckStatus, LocationStatus } from '../../src/store/alerts.js';

const KEY = { checkId: 'c1', location: 'lab' };

/** Feeds observed statuses through step; answers the transitions, as "FROM>TO". */
function run(observed: CheckStatus[], alertAfter: number): string[] {
  let state: LocationStatus | undefined;
  const transitions: string[] = [];
  observed.forEach((status, i) => {
    const { next, transition } = step(state, KEY, status, alertAfter, i * 1000);
    state = next;
    if (transition) transitions.push(`${transition.from}>${transition.to}`);
  });
  return transitions;
}

describe('check status', () => {
  it('reads a result: failures or errors FAILING, degraded DEGRADED, else PASSING', () => {
    expect(resultStatus({ hasFailures: true, hasErrors: false, isDegraded: true })).toBe('FAILING');
    expect(resultStatus({ hasFailures: false, hasErrors: true, isDegraded: false })).toBe('FAILING');
    expect(resultStatus({ hasFailures: false, hasErrors: false, isDegraded: true })).toBe('DEGRADED');
    expect(resultStatus({ hasFailures: false, hasErrors: false, isDegraded: false })).toBe('PASSING');
  });

  it('with alertAfter 1, every change is a transition; a new check counts as PASSING', () => {
    expect(run(['FAILING', 'FAILING', 'PASSING', 'DEGRADED', 'PASSING'], 1)).toEqual(['PASSING>FAILING', 'FAILING>PASSING', 'PASSING>DEGRADED', 'DEGRADED>PASSING']);
    expect(run(['PASSING', 'PASSING'], 1)).toEqual([]);
  });

  it('damps flapping: a status must hold alertAfter results in a row', () => {
    expect(run(['FAILING', 'PASSING', 'FAILING', 'PASSING'], 2)).toEqual([]);
    expect(run(['FAILING', 'FAILING', 'PASSING', 'FAILING', 'PASSING', 'PASSING'], 2)).toEqual(['PASSING>FAILING', 'FAILING>PASSING']);
    // A different candidate restarts the count.
    expect(run(['FAILING', 'DEGRADED', 'DEGRADED', 'DEGRADED'], 3)).toEqual(['PASSING>DEGRADED']);
  });

  it('keeps the pending candidate and its streak', () => {
    const first = step(undefined, KEY, 'FAILING', 3, 0).next;
    const second = step(first, KEY, 'FAILING', 3, 1).next;
    expect(second).toMatchObject({ status: 'PASSING', candidate: 'FAILING', streak: 2 });
    const third = step(second, KEY, 'FAILING', 3, 2);
    expect(third.transition).toEqual({ from: 'PASSING', to: 'FAILING' });
    expect(third.next).toMatchObject({ status: 'FAILING', candidate: null, streak: 0, since: 2 });
  });

  it('overall is the worst location', () => {
    expect(overallStatus([])).toBe('PASSING');
    expect(overallStatus([{ status: 'PASSING' }, { status: 'DEGRADED' }])).toBe('DEGRADED');
    expect(overallStatus([{ status: 'FAILING' }, { status: 'DEGRADED' }])).toBe('FAILING');
  });

  it('tells each channel what changed in what its flags let it see', () => {
    const all = { sendFailure: true, sendRecovery: true, sendDegraded: true };
    const noDegraded = { sendFailure: true, sendRecovery: true, sendDegraded: false };
    const degradedOnly = { sendFailure: false, sendRecovery: true, sendDegraded: true };
    const cases: Array<[typeof all, CheckStatus, CheckStatus, string | undefined]> = [
      [all, 'PASSING', 'FAILING', 'FAILURE'],
      [all, 'PASSING', 'DEGRADED', 'DEGRADED'],
      [all, 'FAILING', 'DEGRADED', 'DEGRADED'],
      [all, 'DEGRADED', 'FAILING', 'FAILURE'],
      [all, 'FAILING', 'PASSING', 'RECOVERY'],
      [all, 'DEGRADED', 'PASSING', 'RECOVERY'],
      [noDegraded, 'PASSING', 'DEGRADED', undefined],
      [noDegraded, 'DEGRADED', 'PASSING', undefined],
      [noDegraded, 'DEGRADED', 'FAILING', 'FAILURE'],
      [noDegraded, 'FAILING', 'PASSING', 'RECOVERY'],
      // The failure it was told of ends, though the check is only degraded: without this its incident never closes.
      [noDegraded, 'FAILING', 'DEGRADED', 'RECOVERY'],
      [{ ...all, sendRecovery: false }, 'FAILING', 'PASSING', undefined],
      [{ ...all, sendRecovery: false }, 'FAILING', 'DEGRADED', 'DEGRADED'],
      // Without sendFailure, failing counts as at least degraded, so the recovery after it is told.
      [degradedOnly, 'PASSING', 'FAILING', 'DEGRADED'],
      [degradedOnly, 'DEGRADED', 'FAILING', undefined],
      [degradedOnly, 'FAILING', 'PASSING', 'RECOVERY'],
      [degradedOnly, 'FAILING', 'DEGRADED', undefined],
      [{ sendFailure: false, sendRecovery: true, sendDegraded: false }, 'PASSING', 'FAILING', undefined],
      [{ sendFailure: false, sendRecovery: true, sendDegraded: false }, 'FAILING', 'PASSING', undefined],
    ];
    for (const [channel, from, to, expected] of cases) expect(notice(channel, { from, to }), `${JSON.stringify(channel)} ${from} → ${to}`).toBe(expected);
  });
});

const EVENT: AlertEvent = {
  event: 'FAILURE',
  check: { id: 'c1', name: 'Shop', checkType: 'URL' },
  location: 'lab',
  status: { previous: 'PASSING', current: 'FAILING' },
  overallStatus: 'FAILING',
  result: {
    id: 'r1',
    url: 'http://127.0.0.1:8080/v1/check-results/c1/r1',
    startedAt: '2026-01-01T00:00:00.000Z',
    stoppedAt: '2026-01-01T00:00:01.000Z',
    responseTime: 1000,
    errorMessage: 'ECONNREFUSED',
  },
  certificate: null,
  occurredAt: '2026-01-01T00:00:01.000Z',
};

function channel(type: string, config: Record<string, unknown>): AlertChannel {
  return {
    id: 7,
    source: 'api',
    type,
    config,
    subscriptions: [],
    autoSubscribe: true,
    sendRecovery: true,
    sendFailure: true,
    sendDegraded: false,
    sslExpiry: false,
    sslExpiryThreshold: 30,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: null,
  };
}

describe('payloads', () => {
  it('Slack: an incoming-webhook message with text and blocks', () => {
    const body = slackPayload(EVENT);
    expect(body.text).toBe('Shop is FAILING in lab');
    const blocks = body.blocks as { type: string; text: { type: string; text: string } }[];
    expect(blocks.every((b) => b.type === 'section' && b.text.type === 'mrkdwn')).toBe(true);
    expect(blocks[1]?.text.text).toContain('ECONNREFUSED');
    expect(blocks[1]?.text.text).toContain('<http://127.0.0.1:8080/v1/check-results/c1/r1|');
  });

  it('Slack: text from the target is shown, not read as markup (no channel ping, no disguised link)', () => {
    const hostile = { ...EVENT, check: { ...EVENT.check, name: 'Shop <!here>' }, result: { ...(EVENT.result as NonNullable<AlertEvent['result']>), errorMessage: '<!channel> outage <https://evil.example/login|Open the result> & more' } };
    const body = slackPayload(hostile);
    const text = JSON.stringify(body);
    expect(text).not.toContain('<!channel>');
    expect(text).not.toContain('<!here>');
    expect(text).not.toContain('<https://evil.example');
    expect((body.blocks as { text: { text: string } }[])[1]?.text.text).toContain('*Error:* &lt;!channel&gt; outage &lt;https://evil.example/login|Open the result&gt; &amp; more');
    expect(body.text).toBe('Shop &lt;!here&gt; is FAILING in lab');
  });

  it('PagerDuty: trigger with a dedup key per check and location, resolve on recovery', () => {
    const trigger = pagerDutyPayload(EVENT, 'R0UTING');
    expect(trigger).toMatchObject({ routing_key: 'R0UTING', event_action: 'trigger', dedup_key: 'outpost:c1:lab' });
    expect(trigger.payload).toMatchObject({ summary: 'Shop is FAILING in lab', source: 'lab', severity: 'critical', timestamp: EVENT.occurredAt });
    const degraded = pagerDutyPayload({ ...EVENT, event: 'DEGRADED' }, 'R0UTING');
    expect((degraded.payload as { severity: string }).severity).toBe('warning');
    const resolve = pagerDutyPayload({ ...EVENT, event: 'RECOVERY', status: { previous: 'FAILING', current: 'PASSING' } }, 'R0UTING');
    expect(resolve).toEqual({ routing_key: 'R0UTING', event_action: 'resolve', dedup_key: 'outpost:c1:lab' });
    expect(channelRequest(channel('PAGERDUTY', { routingKey: 'k' }), EVENT, 1)?.url).toBe(PAGERDUTY_EVENTS_URL);
    expect(channelRequest(channel('PAGERDUTY', { routingKey: 'k', url: 'http://127.0.0.1:1/e' }), EVENT, 1)?.url).toBe('http://127.0.0.1:1/e');
  });

  it('WEBHOOK: the event with its notification id, the custom headers and an HMAC-SHA256 signature of the body', () => {
    const request = channelRequest(channel('WEBHOOK', { url: 'http://127.0.0.1:1/h', headers: { 'x-team': 'ops' }, secret: 's3cret' }), EVENT, 42);
    expect(request).toBeDefined();
    const body = JSON.parse(request?.body ?? '{}') as Record<string, unknown>;
    expect(body).toEqual({ notificationId: 42, ...EVENT });
    expect(request?.headers['x-team']).toBe('ops');
    expect(request?.headers['x-outpost-signature']).toBe(`sha256=${createHmac('sha256', 's3cret').update(request?.body ?? '').digest('hex')}`);
    expect(signature('x', 'k')).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(channelRequest(channel('WEBHOOK', { url: 'http://127.0.0.1:1/h' }), EVENT, 1)?.headers['x-outpost-signature']).toBeUndefined();
    expect(channelRequest(channel('EMAIL', { address: 'a@b' }), EVENT, 1)).toBeUndefined();
  });

  it('finds the error message and the certificate of a result', () => {
    const entry = { apiCheckResult: { requestError: 'connect ECONNREFUSED', response: { tls: { subject: 'CN=a', issuer: 'CN=ca', validTo: 'x', daysToExpiry: 3 } } }, hasFailures: true } as unknown as CheckResultEntry;
    expect(errorMessage(entry)).toBe('connect ECONNREFUSED');
    expect(tlsOf(entry)).toEqual({ subject: 'CN=a', issuer: 'CN=ca', validTo: 'x', daysToExpiry: 3 });
    expect(tlsOf({ apiCheckResult: { response: { tls: null } } } as unknown as CheckResultEntry)).toBeUndefined();
    // A missed heartbeat says why, not that "the check failed".
    const missed = { heartbeatCheckResult: { error: 'No ping received within the period (60 s) and grace (0 s)' }, hasFailures: true } as unknown as CheckResultEntry;
    expect(errorMessage(missed)).toBe('No ping received within the period (60 s) and grace (0 s)');
  });
});

describe('alert channel fields', () => {
  const parse = (raw: unknown) => {
    const item = Fields.root(raw, '$');
    const fields = parseAlertChannel(item, raw);
    return { fields, problems: item.issues.map((i) => `${i.path}: ${i.problem}`) };
  };
  const parseFile = (alertChannels: unknown) => {
    const root = Fields.root({ alertChannels }, '$');
    parseAlertChannels(root);
    return root.issues.map((i) => `${i.path}: ${i.problem}`);
  };

  it('requires type and config, and defaults the rest', () => {
    expect(parse({}).problems).toEqual(['$.type: is required: one of EMAIL, SLACK, WEBHOOK, SMS, PAGERDUTY, OPSGENIE, CALL', '$.config: is required: an object (its fields depend on the type)']);
    expect(parse({ type: 'WEBHOOK', config: { url: 'http://h/' } }).fields).toEqual({
      type: 'WEBHOOK',
      config: { url: 'http://h/' },
      subscriptions: [],
      autoSubscribe: false,
      sendRecovery: true,
      sendFailure: true,
      sendDegraded: false,
      sslExpiry: false,
      sslExpiryThreshold: 30,
    });
  });

  it('checks sslExpiryThreshold, the config of each type and the subscriptions', () => {
    expect(parse({ type: 'SLACK', config: { url: 'http://h/' }, sslExpiryThreshold: 31 }).problems).toEqual(['$.sslExpiryThreshold: must be an integer from 1 to 30']);
    expect(parse({ type: 'SLACK', config: { url: 'http://h/' }, sslExpiryThreshold: 0 }).problems).toHaveLength(1);
    expect(parse({ type: 'SLACK', config: { url: 'http://h/' }, sslExpiryThreshold: 1 }).fields?.sslExpiryThreshold).toBe(1);
    expect(parse({ type: 'SLACK', config: {} }).problems).toEqual(['$.config.url: is required: an http or https URL']);
    expect(parse({ type: 'PAGERDUTY', config: {} }).problems).toEqual(['$.config.routingKey: is required: the integration\'s routing key (Events API v2)']);
    expect(parse({ type: 'WEBHOOK', config: { url: 'ftp://h/' } }).problems).toHaveLength(1);
    expect(parse({ type: 'WEBHOOK', config: { url: 'http://h/', headers: { 'bad name': 'x' } } }).problems).toEqual(['$.config.headers.bad name: is not a valid header name']);
    // What fetch could never send is refused when the channel is made, not retried for ever.
    expect(parse({ type: 'WEBHOOK', config: { url: 'http://h/', headers: { 'x-team': 'ops€' } } }).problems).toEqual([
      '$.config.headers.x-team: must hold only tabs, printable ASCII and Latin-1 characters: no line break or other control character',
    ]);
    expect(parse({ type: 'WEBHOOK', config: { url: 'http://h/', headers: { 'Transfer-Encoding': 'chunked', 'content-length': '5', expect: '100-continue' } } }).problems).toEqual([
      '$.config.headers.Transfer-Encoding: frames the request and cannot be given',
      '$.config.headers.content-length: frames the request and cannot be given',
      '$.config.headers.expect: frames the request and cannot be given',
    ]);
    // Headers fetch sends or handles itself are left to it.
    expect(
      parse({ type: 'WEBHOOK', config: { url: 'http://h/', headers: { 'content-type': 'application/json; charset=utf-8', 'x-team': 'café', host: 'hooks.example', connection: 'close', authorization: 'Bearer x' } } }).problems,
    ).toEqual([]);
    // The password would be refused by fetch at every attempt and written into every attempt's error.
    expect(parse({ type: 'WEBHOOK', config: { url: 'http://user:pa55w0rd@127.0.0.1/ok' } }).problems).toEqual([
      '$.config.url: is required: an http or https URL without a user name or password (send credentials in headers)',
    ]);
    expect(parse({ type: 'PAGERDUTY', config: { routingKey: 'k', url: 'https://u@events.example/' } }).problems).toEqual([
      '$.config.url: must be an http or https URL without a user name or password (send credentials in headers)',
    ]);
    expect(parse({ type: 'EMAIL', config: { address: 'a@b.c' } }).fields?.type).toBe('EMAIL');
    expect(parse({ type: 'WEBHOOK', config: { url: 'http://h/' }, subscriptions: ['a', { checkId: 'b' }, 'a'] }).fields?.subscriptions).toEqual(['a', 'b']);
    expect(parse({ type: 'WEBHOOK', config: { url: 'http://h/' }, sendFailure: 'yes' }).problems).toEqual(['$.sendFailure: must be true or false']);
  });

  it('a checks file: ids required and unique, problems by path; alertAfter checked', () => {
    const problems = parseFile([{ type: 'SLACK', config: { url: 'http://h/' } }, { id: 2, type: 'SLACK', config: { url: 'http://h/' } }, { id: 2, type: 'SLACK', config: { url: 'http://h/' } }]);
    expect(problems).toEqual(['$.alertChannels[0].id: is required: a positive integer', '$.alertChannels[2].id: 2 is already used by another channel']);
    const file = (extra: Record<string, unknown>, check: Record<string, unknown> = {}) =>
      JSON.stringify({
        privateLocations: [{ id: 'lab', name: 'Lab' }],
        checks: [{ id: 'c1', name: 'c1', checkType: 'URL', frequency: 1, request: { method: 'GET', url: 'http://127.0.0.1:9/' }, ...check }],
        ...extra,
      });
    const parsed = parseServerChecksFile(file({ alertChannels: [{ id: 5, type: 'WEBHOOK', config: { url: 'http://h/' }, autoSubscribe: true }] }), 'f.json', definitionRegistry());
    expect(parsed.alertChannels).toMatchObject([{ id: 5, type: 'WEBHOOK', autoSubscribe: true }]);
    expect(() => parseServerChecksFile(file({ alertChannels: [{ id: 5, type: 'WEBHOOK', config: {} }] }), 'f.json', definitionRegistry())).toThrow('$.alertChannels[0].config.url');
    expect(() => parseServerChecksFile(file({}, { alertAfter: 0 }), 'f.json', definitionRegistry())).toThrow('$.checks[0].alertAfter');
    expect(parseServerChecksFile(file({}, { alertAfter: 3 }), 'f.json', definitionRegistry()).checks).toHaveLength(1);
  });

  it('a checks file nested 20,000 deep anywhere (a field nobody reads included) is refused naming where, not a stack overflow', () => {
    // Files written out by hand around DEEP: JSON.stringify itself cannot go 20,000 levels deep.
    const DEEP = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const deep = JSON.parse(DEEP) as unknown;
    const file = (extra: Record<string, string>, check: Record<string, string> = {}) => {
      const fields = (record: Record<string, string>) => Object.entries(record).map(([key, text]) => `,${JSON.stringify(key)}:${text}`).join('');
      // A check given its own request has no other: a key given twice is refused before any depth is measured.
      const request = 'request' in check ? '' : ',"request":{"url":"http://127.0.0.1:9/"}';
      return `{"privateLocations":[{"id":"lab","name":"Lab"}],"checks":[{"id":"c1","name":"c1","checkType":"URL","frequency":1${request}${fields(check)}}]${fields(extra)}}`;
    };
    const refused = (text: string) => {
      try {
        parseServerChecksFile(text, 'f.json', definitionRegistry());
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refused(file({}, { unknownField: DEEP }))).toContain('$.checks[0].unknownField[0]…: is nested too deep (a checks file may nest 128 levels)');
    expect(refused(file({}, { request: `{"url":"http://127.0.0.1:9/","body":${DEEP}}` }))).toContain('$.checks[0].request.body…: is nested too deep');
    expect(refused(file({ alertChannels: `[{"id":1,"type":"EMAIL","config":{"address":${DEEP}}}]` }))).toContain('$.alertChannels[0].config.address…: is nested too deep');
    // The API's channel: its config alone is bounded by the definition limit.
    const problems = parseFile([{ id: 1, type: 'WEBHOOK', config: { url: 'http://h/', extra: deep } }]);
    expect(problems).toEqual(['$.alertChannels[0].config.extra[0][0][0]…: is nested deeper than 64 levels']);
  });
});
