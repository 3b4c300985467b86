// Whether a header can be sent as written: shared by a check's request
// headers (src/checks/http/request.ts) and an alert channel's
// (src/checks/alert-channel-fields.ts), which both refuse at parse time what
// undici would refuse at every attempt.

/** An HTTP field name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Characters a header value may not hold: controls other than tab (a line break would end the header), and past Latin-1 (as undici refuses). */
const HEADER_VALUE_BAD = /[^\t\x20-\x7e\x80-\xff]/;

/** Why a header cannot be sent as it is: which part, and why; undefined when it can. */
export function headerProblem(key: string, value: string): { part: 'key' | 'value'; problem: string } | undefined {
  if (!HEADER_NAME.test(key)) return { part: 'key', problem: `must be a header name: letters, digits and !#$%&'*+-.^_\`|~, no spaces (got ${JSON.stringify(key.slice(0, 80))})` };
  if (HEADER_VALUE_BAD.test(value)) return { part: 'value', problem: 'must hold only tabs, printable ASCII and Latin-1 characters: no line break or other control character' };
  return undefined;
}
