// Turns what a network call threw into one line a person on call understands.

/** Raised through the job's AbortSignal; `reason` says why the job was stopped. */
export class JobAbortedError extends Error {
  constructor(
    readonly reason: 'timeout' | 'lease-lost' | 'shutdown',
    message: string,
  ) {
    super(message);
    this.name = 'JobAbortedError';
  }
}

/**
 * undici's code for a response it refuses to read (an unsolicited `100 Continue`, bytes before the request)
 * is UND_ERR_SOCKET, as for a closed connection: told apart here, as the server's protocol failure.
 */
export const BAD_RESPONSE_CODE = 'UND_ERR_BAD_RESPONSE';

const CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by peer',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'DNS lookup failed: no such host',
  EAI_AGAIN: 'DNS lookup failed temporarily',
  EPIPE: 'connection closed while sending',
  UND_ERR_SOCKET: 'connection closed by peer',
  [BAD_RESPONSE_CODE]: 'the server sent a response that cannot be read before its final one: an unsolicited 100 Continue, or bytes before the request was sent',
  UND_ERR_HEADERS_TIMEOUT: 'timed out waiting for response headers',
  UND_ERR_BODY_TIMEOUT: 'timed out reading the response body',
  CERT_HAS_EXPIRED: 'TLS certificate has expired',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS certificate is self-signed',
  SELF_SIGNED_CERT_IN_CHAIN: 'TLS certificate chain contains a self-signed certificate',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate cannot be verified',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS certificate does not match the host name',
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: 'the server requires a client certificate and none was presented',
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: 'the server rejected the client certificate',
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: "the server does not trust the client certificate's issuer",
};


export function errorCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as NodeJS.ErrnoException).code;
    if (code === 'UND_ERR_SOCKET' && current.message === 'bad response') return BAD_RESPONSE_CODE;
    if (typeof code === 'string' && code !== 'UND_ERR_ABORTED' && code !== 'ABORT_ERR') return code;
    current = (current as Error & { cause?: unknown }).cause;
  }
  return undefined;
}

export function describeError(error: unknown, signal: AbortSignal, target: string): string {
  if (signal.aborted && signal.reason instanceof JobAbortedError) return signal.reason.message;
  const code = errorCode(error);
  const text = error instanceof Error ? error.message : String(error);
  if (code && CODES[code]) return `${CODES[code]} (${code}) at ${target}`;
  return code ? `${text} (${code}) at ${target}` : `${text} at ${target}`;
}
