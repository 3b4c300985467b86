// The host's name servers, for a DNS check that names none: the `nameserver`
// lines of /etc/resolv.conf, read at each run (containers rewrite the file).

import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';

export const RESOLV_CONF = '/etc/resolv.conf';

/**
 * The addresses of the `nameserver` lines, in order. As in glibc: comments
 * start with `#` or `;`, only the first word after the keyword counts, and a
 * value that is not an IP address (IPv6 may carry a `%zone`) is skipped.
 */
export function parseResolvConf(text: string): string[] {
  const servers: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const [keyword, value] = line.split(/\s+/);
    if (keyword !== 'nameserver' || value === undefined) continue;
    const address = value.replace(/[#;].*$/, '');
    if (isIP(address) !== 0) servers.push(address);
  }
  return servers;
}

/** The first name server of `file`, or a one-line reason why there is none. */
export async function systemNameServer(file = RESOLV_CONF): Promise<{ ok: true; address: string } | { ok: false; error: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    return { ok: false, error: `request.nameServer is not set and ${file} cannot be read (${code}); set request.nameServer` };
  }
  const [first] = parseResolvConf(text);
  if (first === undefined) return { ok: false, error: `request.nameServer is not set and ${file} lists no nameserver; set request.nameServer` };
  return { ok: true, address: first };
}
