// Which request failures are the network's: only these trigger
// diagnostics (a packet capture and a traceroute). A status or an assertion
// is an HTTP-level failure: the network delivered an answer, so there is
// nothing for a capture to explain.

export type NetworkFailureKind = 'dns' | 'refused' | 'reset' | 'timeout' | 'tls' | 'unreachable';

export type FailureClass = { class: 'network'; kind: NetworkFailureKind } | { class: 'http' };

const KINDS: Record<string, NetworkFailureKind> = {
  ENOTFOUND: 'dns',
  EAI_AGAIN: 'dns',
  EAI_FAIL: 'dns',
  EAI_NONAME: 'dns',
  EAI_NODATA: 'dns',
  ECONNREFUSED: 'refused',
  ECONNRESET: 'reset',
  ECONNABORTED: 'reset',
  EPIPE: 'reset',
  UND_ERR_SOCKET: 'reset',
  ETIMEDOUT: 'timeout',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  EHOSTDOWN: 'unreachable',
  ENETDOWN: 'unreachable',
  EADDRNOTAVAIL: 'unreachable',
  EPROTO: 'tls',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'tls',
  SELF_SIGNED_CERT_IN_CHAIN: 'tls',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'tls',
  UNABLE_TO_GET_ISSUER_CERT: 'tls',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'tls',
};

/**
 * Classifies a failed request by its errno-style code. `responded` is true
 * when a status line had arrived: a timeout after that (a slow body) is the
 * server's, not the network's; a reset is the network's either way. Returns
 * undefined for a request without an error code (it did not fail, or failed
 * for a reason of the agent's own, like too many redirects).
 */
export function classifyFailure(code: string | undefined, responded = false): FailureClass | undefined {
  if (!code) return undefined;
  let kind = KINDS[code];
  if (!kind && (code.startsWith('CERT_') || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_'))) kind = 'tls';
  if (!kind) return { class: 'http' };
  if (kind === 'timeout' && responded) return { class: 'http' };
  return { class: 'network', kind };
}

/** True for the failures that trigger diagnostics. */
export function isNetworkFailure(code: string | undefined, responded = false): boolean {
  return classifyFailure(code, responded)?.class === 'network';
}
