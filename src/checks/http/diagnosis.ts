// The URL and API executors' one call into diagnostics: after a
// network failure of the exchange, diagnose where the connection went (the
// check's host, or its proxy) and repeat the very same request.

import type { CheckDefinition } from '../definition.js';
import type { ExecutionContext } from '../executor.js';
import { type Exchange, type ExchangeSpec, performExchange } from './exchange.js';
import { type DiagnosisTarget, diagnose } from '../../diagnostics/diagnose.js';
import { isNetworkFailure } from '../../diagnostics/failure-class.js';

export function httpDiagnosisTarget(spec: ExchangeSpec, ctx: ExecutionContext): DiagnosisTarget {
  const through = new URL(spec.proxyUrl ?? spec.url);
  const port = Number(through.port) || (through.protocol === 'https:' ? 443 : 80);
  return {
    host: through.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    ipFamily: spec.ipFamily,
    ...(spec.proxyUrl ? { via: 'the proxy' } : {}),
    // The repeat's own jobLog lines are not kept: the diagnosis sums it up in one.
    repeat: async (signal) => (await performExchange(spec, { ...ctx, signal, jobLog: [] })).error,
  };
}

/**
 * Diagnoses the exchange when it failed for a network reason, unless the
 * check expects to fail (`shouldFail`): its jobLog gets the findings, the
 * attempt's artifacts the files.
 */
export async function diagnoseExchange(check: CheckDefinition<unknown>, spec: ExchangeSpec, exchange: Exchange, ctx: ExecutionContext): Promise<void> {
  if (check.shouldFail || !ctx.diagnostics || !isNetworkFailure(exchange.errorCode, exchange.status !== undefined)) return;
  const { jobLogLines } = await diagnose(ctx, httpDiagnosisTarget(spec, ctx));
  ctx.jobLog.push(...jobLogLines);
}
