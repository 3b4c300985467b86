// Secrets out of artifacts, before they are bundled or leave the agent
// (one scrubber, src/secrets/scrubber.ts, used by all).
//
// Text artifacts (the traceroute text and JSON) are scrubbed as text. A pcap
// is binary with length fields, so it is masked in place, packet by packet:
// from where a secret starts to the end of that packet, the bytes become `*`
// and every length stays as it was, so the file still opens in tshark.
// Limit: a secret split across two packets is not found (the repeat
// request of a failed plain-HTTP check is the only traffic that can carry
// one; refused, timed-out, DNS and TLS failures send none in clear text).

import { readFile, writeFile } from 'node:fs/promises';
import type { SecretRegistry } from '../secrets/policy.js';
import { JobSecrets } from '../secrets/policy.js';
import type { Scrubber } from '../secrets/scrubber.js';

/** The job's scrubber behind `ctx.secrets` (the queue always sets one). */
export function jobScrubber(secrets: SecretRegistry | undefined): Scrubber | undefined {
  return secrets instanceof JobSecrets ? secrets.scrubber : undefined;
}

/** The single call site for text artifacts: every secret form replaced by `*****`. */
export function scrubArtifactText(text: string, scrubber: Scrubber | undefined): string {
  return scrubber ? scrubber.scrubText(text) : text;
}

const STAR = 0x2a;

/** Masks secrets in one packet's bytes in place; true when something was masked. */
function maskPacket(data: Buffer, scrubber: Scrubber): boolean {
  const scrubbed = scrubber.scrubBuffer(data);
  if (scrubbed === data) return false;
  let first = 0;
  while (first < data.length && first < scrubbed.length && data[first] === scrubbed[first]) first++;
  // The redaction mark may coincide with the secret's first bytes: start a mark's length earlier.
  data.fill(STAR, Math.max(0, first - 5));
  return true;
}

/**
 * Masks secrets in a classic pcap file (what `tcpdump -w` writes), packet by
 * packet, in place. Returns the number of packets masked, or null when the
 * file is not a pcap this code can walk (then it is left as it is).
 */
export async function scrubPcapFile(file: string, scrubber: Scrubber | undefined): Promise<number | null> {
  if (!scrubber || scrubber.secretCount === 0) return 0;
  const bytes = await readFile(file);
  if (bytes.length < 24) return null;
  const magic = bytes.readUInt32LE(0);
  let little: boolean;
  if (magic === 0xa1b2c3d4 || magic === 0xa1b23c4d) little = true;
  else if (magic === 0xd4c3b2a1 || magic === 0x4d3cb2a1) little = false;
  else return null;
  const u32 = (at: number) => (little ? bytes.readUInt32LE(at) : bytes.readUInt32BE(at));
  let masked = 0;
  let offset = 24;
  while (offset + 16 <= bytes.length) {
    const captured = u32(offset + 8);
    const start = offset + 16;
    const end = Math.min(bytes.length, start + captured);
    if (maskPacket(bytes.subarray(start, end), scrubber)) masked++;
    offset = start + captured;
  }
  if (masked > 0) await writeFile(file, bytes);
  return masked;
}
