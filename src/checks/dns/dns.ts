// DNS monitor: one query on the wire (UDP, or TCP; a truncated UDP answer is
// retried over TCP), the answer decoded into rcode, flags and records in dig's
// format, and assertions on the rcode, the time, the answer as text or as a
// DNS-over-HTTPS-style JSON document (docs/checks/dns.md).

import { randomInt } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { judge } from '../../net/network-policy.js';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { type Assertion, type AssertionOutcome, evaluate } from '../assertions/assertions.js';
import type { CheckDefinition } from '../definition.js';
import { systemNameServer } from './resolv-conf.js';
import { displayServer, type ExchangeResult, tcpExchange, udpExchange, type Verdict } from './transport.js';
import { type DnsMessage, EDNS_UDP_PAYLOAD, type QueryType, RECORD_TYPES, TYPE_CODES, WireError } from './message.js';
import { encodeQuery, normalizeQueryName, reverseName } from './query.js';
import { decodeMessage } from './read.js';
import { jsonAnswer, textAnswer } from './present.js';
import { JobAbortedError } from '../../core/errors.js';
import type { ExecutionContext, Executor } from '../executor.js';
import type { Outcome } from '../../core/outcome.js';
import type { Fields } from '../fields.js';
import { withMatchBudget } from '../assertions/bounded-match.js';
import { evaluateJsonPath } from '../assertions/jsonpath.js';
import { UnknownVariableError } from '../variables.js';

export interface DnsRequest {
  recordType: QueryType;
  query: string;
  /** Absent: the first `nameserver` of /etc/resolv.conf at run time. */
  nameServer?: string;
  port: number;
  protocol: 'UDP' | 'TCP';
}

export const DNS_ASSERTION_SOURCES = ['RESPONSE_CODE', 'RESPONSE_TIME', 'TEXT_ANSWER', 'JSON_ANSWER'] as const;
const LIMITS = { degradedMs: 500, maxMs: 1000, capMs: 5000 };
/** A UDP query is re-sent (same id) after this long without an answer, up to UDP_MAX_SENDS sends in all. */
export const UDP_RESEND_MS = 1000;
export const UDP_MAX_SENDS = 3;

const hasVariables = (text: string) => text.includes('{{');

/** What `query` asks for: a PTR query for an IP address asks for its reverse name. */
function questionName(type: QueryType, query: string): { ok: true; name: string } | { ok: false; problem: string } {
  if (type === 'PTR') {
    const reverse = reverseName(query);
    if (reverse) return { ok: true, name: reverse };
  }
  return normalizeQueryName(query);
}

const HOSTNAME = /^(?=.{1,253}\.?$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** A name server is an IP address (IPv6 with or without brackets) or a host name; the port is a field of its own. */
function checkNameServer(value: string): { ok: true; server: string } | { ok: false; problem: string } {
  const unbracketed = /^\[(.*)\]$/.exec(value)?.[1] ?? value;
  if (isIP(unbracketed) !== 0) return { ok: true, server: unbracketed };
  if (/^[^:]+:\d+$/.test(value) || /^\[.*\]:\d+$/.test(value)) {
    return { ok: false, problem: `must be an IP address or host name without a port; put the port in request.port (got ${JSON.stringify(value)})` };
  }
  if (HOSTNAME.test(value)) return { ok: true, server: value };
  return { ok: false, problem: `must be an IP address or a host name (got ${JSON.stringify(value.slice(0, 80))})` };
}

function parseDnsRequest(fields: Fields): DnsRequest {
  const recordType = fields.oneOf('recordType', RECORD_TYPES, { required: true }) ?? 'A';
  const query = fields.string('query', { required: true, minLength: 1, maxLength: 300 }) ?? '';
  if (query && !hasVariables(query)) {
    const checked = questionName(recordType, query);
    if (!checked.ok) fields.fail(fields.at('query'), checked.problem);
  }
  const nameServer = fields.string('nameServer', { minLength: 1, maxLength: 253 });
  if (nameServer && !hasVariables(nameServer)) {
    const checked = checkNameServer(nameServer);
    if (!checked.ok) fields.fail(fields.at('nameServer'), checked.problem);
  }
  return {
    recordType,
    query,
    ...(nameServer !== undefined ? { nameServer } : {}),
    port: fields.integer('port', { min: 1, max: 65535, default: 53 }),
    protocol: fields.oneOf('protocol', ['UDP', 'TCP'] as const, { default: 'UDP' }),
  };
}

/** The DNS check's assertions; JSON_ANSWER follows the shared JSONPath rules (evaluateJsonPath). */
export function evaluateDnsAssertions(assertions: Assertion[], message: DnsMessage, responseTime: number): AssertionOutcome[] {
  let document: Record<string, unknown> | undefined;
  return withMatchBudget(() => assertions.map((assertion) => {
    switch (assertion.source) {
      case 'RESPONSE_CODE':
        // The rcode name (NOERROR, NXDOMAIN…); a numeric target compares the number.
        return evaluate(assertion, /^\d+$/.test(assertion.target.trim()) ? message.rcode : message.rcodeName);
      case 'RESPONSE_TIME':
        return evaluate(assertion, Math.round(responseTime));
      case 'TEXT_ANSWER':
        return evaluate(assertion, textAnswer(message.answer));
      case 'JSON_ANSWER':
        document ??= jsonAnswer(message);
        return evaluateJsonPath(assertion, document);
      default:
        return { ...assertion, actual: null, passed: false, error: `source ${assertion.source} does not apply to DNS checks` };
    }
  }));
}

function responseDetail(
  message: DnsMessage,
  transport: 'UDP' | 'TCP',
  truncatedOverUdp: boolean,
): Record<string, unknown> {
  return {
    rcode: message.rcodeName,
    rcodeValue: message.rcode,
    opcode: message.opcode,
    id: message.id,
    flags: message.flags,
    flagsText: message.flagsText,
    transport,
    truncatedOverUdp,
    size: message.size,
    edns: message.edns,
    question: message.question,
    answer: message.answer,
    authority: message.authority,
    additional: message.additional,
    textAnswer: textAnswer(message.answer),
  };
}

export interface DnsExecutorOptions {
  /** Where the default name server comes from (tests point it at a file of their own). */
  resolvConf?: string;
  resendMs?: number;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

export function createDnsExecutor(options: DnsExecutorOptions = {}): Executor<DnsRequest> {
  const resendMs = options.resendMs ?? UDP_RESEND_MS;

  async function run(check: CheckDefinition<DnsRequest>, ctx: ExecutionContext): Promise<Outcome> {
    const spec = check.request;
    const startedAt = new Date();
    const start = performance.now();
    const log = (line: string) => ctx.jobLog.push(line);
    const reported: Record<string, unknown> = {
      recordType: spec.recordType,
      query: spec.query,
      queryName: null,
      nameServer: spec.nameServer ?? null,
      nameServerSource: spec.nameServer === undefined ? 'resolv.conf' : 'request',
      port: spec.port,
      protocol: spec.protocol,
    };
    const timings: Record<string, number | null> = { lookup: null, udp: null, tcpConnect: null, tcp: null, total: 0 };
    let message: DnsMessage | undefined;
    let transport: 'UDP' | 'TCP' = spec.protocol;
    let truncatedOverUdp = false;
    let error: string | undefined;
    let errorCode: string | undefined;

    // The check's own deadline (its cap) as well as the queue's signal, so a
    // direct caller without a queue cannot wait forever either.
    const deadline = new AbortController();
    const capTimer = setTimeout(
      () => deadline.abort(new JobAbortedError('timeout', `Timed out after ${LIMITS.capMs} ms (the DNS check limit)`)),
      LIMITS.capMs,
    );
    const onOuterAbort = () => deadline.abort(ctx.signal.reason);
    if (ctx.signal.aborted) onOuterAbort();
    else ctx.signal.addEventListener('abort', onOuterAbort, { once: true });
    /** A lost lease or a shutdown says so; a timeout is described by the exchange itself. */
    const abortedText = (fallback: string) => {
      const reason = deadline.signal.reason;
      return reason instanceof JobAbortedError && reason.reason !== 'timeout' ? reason.message : fallback;
    };

    try {
      let query: string;
      let server: string;
      try {
        query = ctx.variables.interpolate(spec.query, 'request.query');
        server = spec.nameServer === undefined ? '' : ctx.variables.interpolate(spec.nameServer, 'request.nameServer');
      } catch (caught) {
        if (caught instanceof UnknownVariableError) throw new SetupError(caught.message, 'EINVAL');
        throw caught;
      }
      reported.query = query;
      const qname = questionName(spec.recordType, query);
      if (!qname.ok) throw new SetupError(`request.query ${qname.problem}`, 'EINVAL');
      reported.queryName = qname.name;
      if (spec.recordType === 'PTR' && qname.name !== `${query.replace(/\.$/, '')}.`) log(`PTR query for ${query}: asking for ${qname.name}`);

      if (spec.nameServer === undefined) {
        const system = await systemNameServer(options.resolvConf);
        if (!system.ok) throw new SetupError(system.error, 'ENOENT');
        server = system.address;
        log(`Using name server ${server} from ${options.resolvConf ?? '/etc/resolv.conf'}`);
      } else {
        const checked = checkNameServer(server);
        if (!checked.ok) throw new SetupError(`request.nameServer ${checked.problem}`, 'EINVAL');
        server = checked.server;
      }
      reported.nameServer = server;

      let address = server;
      // A host name is resolved by the system resolver, an IPv4 address preferred (as ipFamily defaults to IPv4 elsewhere).
      if (isIP(server) === 0) {
        const lookupStart = performance.now();
        const resolved = await Promise.race([
          lookup(server, { verbatim: false }).then(
            (r) => ({ ok: true as const, address: r.address }),
            (e: NodeJS.ErrnoException) => ({ ok: false as const, code: e.code ?? 'ENOTFOUND' }),
          ),
          new Promise<{ ok: false; code: string }>((resolve) => {
            if (deadline.signal.aborted) resolve({ ok: false, code: 'ETIMEDOUT' });
            deadline.signal.addEventListener('abort', () => resolve({ ok: false, code: 'ETIMEDOUT' }), { once: true });
          }),
        ]);
        timings.lookup = round(performance.now() - lookupStart);
        if (!resolved.ok) {
          throw new SetupError(
            abortedText(`cannot resolve the name server ${server} with the system resolver (${resolved.code})`),
            resolved.code,
          );
        }
        address = resolved.address;
        log(`Resolved name server ${server} to ${address}`);
      }
      // The check's own name server is judged; the system's (resolv.conf) is the operator's choice and resolves every check's names anyway.
      const policy = ctx.settings.networkPolicy;
      const verdict = policy && spec.nameServer !== undefined ? judge(policy, address, spec.port) : undefined;
      if (verdict && !verdict.allowed) throw new SetupError(verdict.reason, 'ENETPOLICY');
      const family = isIP(address) === 6 ? 6 : 4;
      const serverText = displayServer(address, spec.port);
      const qtypeCode = TYPE_CODES[spec.recordType];

      const ask = async (via: 'UDP' | 'TCP'): Promise<ExchangeResult<DnsMessage>> => {
        const id = randomInt(0, 65536);
        const inspect = (buf: Buffer): Verdict<DnsMessage> => {
          if (buf.length < 12) return { kind: 'ignore', reason: `${buf.length} bytes, too short for a DNS message` };
          if (buf.readUInt16BE(0) !== id) return { kind: 'ignore', reason: `id ${buf.readUInt16BE(0)} is not the query's id ${id}` };
          if ((buf.readUInt8(2) & 0x80) === 0) return { kind: 'ignore', reason: 'it is a query, not an answer' };
          let decoded: DnsMessage;
          try {
            decoded = decodeMessage(buf);
          } catch (caught) {
            const reason = caught instanceof WireError ? caught.message : String(caught);
            return { kind: 'fail', code: 'EBADRESP', error: `malformed answer from ${serverText} over ${via}: ${reason}` };
          }
          const [q] = decoded.question;
          // Servers may omit the question in an error answer (FORMERR, NOTIMP…); otherwise it must be ours.
          if (decoded.question.length === 0 && decoded.rcode !== 0) return { kind: 'accept', value: decoded };
          if (decoded.question.length !== 1 || !q || q.name.toLowerCase() !== qname.name.toLowerCase() || q.typeCode !== qtypeCode || q.class !== 'IN') {
            const got = decoded.question.map((x) => `${x.name} ${x.class} ${x.type}`).join(', ') || 'no question';
            return { kind: 'ignore', reason: `its question (${got}) is not ${qname.name} IN ${spec.recordType}` };
          }
          return { kind: 'accept', value: decoded };
        };
        const bytes = encodeQuery(id, qname.name, spec.recordType);
        log(`Querying ${serverText} over ${via}: ${qname.name} IN ${spec.recordType} (id ${id}, RD, EDNS0 UDP size ${EDNS_UDP_PAYLOAD}, ${bytes.length} bytes)`);
        const common = { address, family: family as 4 | 6, port: spec.port, query: bytes, signal: deadline.signal, inspect, log };
        return via === 'UDP' ? udpExchange({ ...common, resendMs, maxSends: UDP_MAX_SENDS }) : tcpExchange(common);
      };

      let result = await ask(spec.protocol);
      if (spec.protocol === 'UDP') timings.udp = result.elapsedMs;
      else {
        timings.tcp = result.elapsedMs;
        timings.tcpConnect = result.ok ? (result.connectMs ?? null) : null;
      }
      if (result.ok && spec.protocol === 'UDP' && result.value.flags.TC) {
        message = result.value;
        truncatedOverUdp = true;
        log(`The answer over UDP is truncated (TC, ${result.size} bytes); retrying over TCP`);
        result = await ask('TCP');
        timings.tcp = result.elapsedMs;
        timings.tcpConnect = result.ok ? (result.connectMs ?? null) : null;
        if (result.ok) transport = 'TCP';
      }
      if (!result.ok) {
        error = result.aborted ? abortedText(result.error) : result.error;
        errorCode = result.code;
      } else {
        message = result.value;
        const m = message;
        log(
          `Answer over ${transport}: ${m.rcodeName}, flags ${m.flagsText || '(none)'}, ` +
            `${m.answer.length} answer / ${m.authority.length} authority / ${m.additional.length} additional records, ${result.size} bytes`,
        );
        if (m.trailingBytes > 0) log(`Warning: ${m.trailingBytes} bytes after the last record were ignored`);
      }
    } catch (caught) {
      if (!(caught instanceof SetupError)) throw caught;
      error = caught.message;
      errorCode = caught.code;
    } finally {
      clearTimeout(capTimer);
      ctx.signal.removeEventListener('abort', onOuterAbort);
    }

    const end = performance.now();
    timings.total = round(end - start);
    const responseTime = timings.total ?? 0;
    const assertions = error === undefined && message ? evaluateDnsAssertions(check.assertions, message, responseTime) : [];
    // Without assertions a DNS check passes on NOERROR only; with assertions, they alone decide.
    const assertionsFailed =
      error === undefined && (check.assertions.length > 0 ? assertions.some((a) => !a.passed) : message?.rcode !== 0);
    if (error !== undefined) log(`Query failed: ${error}`);
    else if (check.assertions.length === 0 && message && message.rcode !== 0) {
      log(`${message.rcodeName} fails the check: without assertions only NOERROR passes (assert RESPONSE_CODE to expect another)`);
    }

    return {
      startedAt,
      stoppedAt: new Date(),
      responseTime,
      ...(error !== undefined ? { error } : {}),
      ...(errorCode !== undefined && error !== undefined ? { errorCode } : {}),
      assertionsFailed,
      member: 'dnsCheckResult',
      detail: {
        assertions,
        request: reported,
        response: message ? responseDetail(message, transport, truncatedOverUdp) : null,
        timings,
        requestError: error ?? null,
        jobLog: ctx.jobLog,
        jobAssets: [],
      },
    };
  }

  return {
    checkType: 'DNS',
    member: 'dnsCheckResult',
    limits: LIMITS,
    assertionSources: DNS_ASSERTION_SOURCES,
    parseRequest: parseDnsRequest,
    target: (r) => `${r.query} ${r.recordType} @${r.nameServer ?? 'resolv.conf'}:${r.port}/${r.protocol}`,
    run,
  };
}

/** A run that ends before (or instead of) a query: bad input after variables, no name server. */
class SetupError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

export const dnsExecutor = createDnsExecutor();
