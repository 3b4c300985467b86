// Line-folded base64 (MIME's 76 characters a line, PEM's 64, or a script's
// `\r\n` every few characters): a secret's base64 form is cut by line breaks
// that no pattern holds. The stretches of text where line breaks sit between
// base64 characters are joined without them here, so that the scrubber can
// look for base64 forms in them and map what it finds back.
//
// A line break is joined when the characters on both sides are base64
// characters and the line on one side is made of nothing else: folded data,
// not prose or headers (whose lines hold spaces and colons). Each line is
// read at most twice, so the cost is linear in the text; a text without
// line breaks costs one indexOf.

/** A stretch of the text with its joined line breaks removed: `origin[i]` is where `joined[i]` sits in the text. */
export interface FoldedRegion {
  joined: string;
  origin: Int32Array;
}

function isBase64(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2b || c === 0x2f || c === 0x3d || c === 0x5f || c === 0x2d;
}

function isBreak(c: number): boolean {
  return c === 0x0a || c === 0x0d;
}

/** The folded stretches of `text`, left to right (none when no line break sits between base64 lines). */
export function foldedRegions(text: string): FoldedRegion[] {
  const n = text.length;
  const regions: FoldedRegion[] = [];
  // Base64 runs of the region being built, as [start, end) pairs in the text.
  let pieces: number[] = [];
  const close = () => {
    if (pieces.length > 2) {
      let length = 0;
      for (let k = 0; k < pieces.length; k += 2) length += (pieces[k + 1] as number) - (pieces[k] as number);
      const origin = new Int32Array(length);
      let joined = '';
      let at = 0;
      for (let k = 0; k < pieces.length; k += 2) {
        const start = pieces[k] as number;
        const end = pieces[k + 1] as number;
        joined += text.slice(start, end);
        for (let i = start; i < end; i++) origin[at++] = i;
      }
      regions.push({ joined, origin });
    }
    pieces = [];
  };
  // A break is found by its LF (LF or CRLF line ends); a CR beside it belongs to the same break.
  let newline = text.indexOf('\n');
  while (newline !== -1) {
    let breakStart = newline;
    while (breakStart > 0 && isBreak(text.charCodeAt(breakStart - 1))) breakStart--;
    let breakEnd = newline + 1;
    while (breakEnd < n && isBreak(text.charCodeAt(breakEnd))) breakEnd++;
    let joinedHere = false;
    if (breakStart > 0 && breakEnd < n && isBase64(text.charCodeAt(breakStart - 1)) && isBase64(text.charCodeAt(breakEnd))) {
      let lineStart = breakStart;
      while (lineStart > 0 && isBase64(text.charCodeAt(lineStart - 1))) lineStart--;
      let lineEnd = breakEnd;
      while (lineEnd < n && isBase64(text.charCodeAt(lineEnd))) lineEnd++;
      const wholeBefore = lineStart === 0 || isBreak(text.charCodeAt(lineStart - 1));
      const wholeAfter = lineEnd === n || isBreak(text.charCodeAt(lineEnd));
      if (wholeBefore || wholeAfter) {
        joinedHere = true;
        // Continues the region when its last run ends at this break.
        if (pieces.length === 0 || pieces[pieces.length - 1] !== breakStart) {
          close();
          pieces.push(lineStart, breakStart);
        }
        pieces.push(breakEnd, lineEnd);
      }
    }
    if (!joinedHere) close();
    newline = text.indexOf('\n', breakEnd);
  }
  close();
  return regions;
}

/**
 * A JSON text as foldedRegions reads it: its escaped line breaks become
 * breaks, and every quote one too (a string's ends are its first and last
 * line's ends). Other escapes are left as they are.
 */
export function unfoldJson(json: string): string {
  return json.replace(/\\[nr\\"]|"/g, (m) => (m === '\\n' || m === '"' ? '\n' : m === '\\r' ? '\r' : m));
}

/**
 * Whether a JSON text as JSON.stringify writes it (compact or indented) holds
 * a line break, escaped (`\n`, `\r`) or raw. Without one jsonMayFold is false:
 * its only other breaks are quotes, and in JSON a quote has syntax on its
 * outer side, never a base64 character. Four native searches, where
 * jsonMayFold is a pass in JavaScript: most result lines hold no break.
 */
export function jsonHasBreak(json: string): boolean {
  return json.includes('\\n') || json.includes('\n') || json.includes('\\r') || json.includes('\r');
}

const OTHER = 0;
const BASE64 = 1;
const BREAK = 2;
/** The class of a run before the text's first character and after its last: a line's end, as a break is. */
const EDGE = 3;

/**
 * Whether foldedRegions(unfoldJson(json)) finds any region, answered in one
 * pass over `json` without building the unfolded text: a run of breaks that
 * holds a line feed, between two runs of base64 characters, one of which is
 * a whole line (a break or the text's edge on its other side). The common
 * answer is no (a DNS answer's lines hold dots and tabs), and it costs no
 * copy. Linear in the text whatever it holds, unlike a regular expression
 * for the same question, which backtracks quadratically on a run of `\n`.
 */
export function jsonMayFold(json: string): boolean {
  const n = json.length;
  // The last three closed runs' classes (oldest first), the open run's class, and whether a break run holds a LF.
  let a = EDGE;
  let b = EDGE;
  let c = EDGE;
  let cHasLineFeed = false;
  let open = EDGE;
  let openHasLineFeed = false;
  // Closes the open run and starts one of class `next`: the window a, b, c, open shifts by one.
  const shift = (next: number): boolean => {
    // The run that closes now is base64, after a LF-holding break run after base64: a join, if one side is a whole line.
    if (open === BASE64 && c === BREAK && cHasLineFeed && b === BASE64 && (a === BREAK || a === EDGE || next === BREAK || next === EDGE)) return true;
    a = b;
    b = c;
    c = open;
    cHasLineFeed = openHasLineFeed;
    open = next;
    openHasLineFeed = false;
    return false;
  };
  const take = (kind: number, lineFeed: boolean): boolean => {
    if (kind !== open && shift(kind)) return true;
    if (lineFeed) openHasLineFeed = true;
    return false;
  };
  for (let i = 0; i < n; i++) {
    const code = json.charCodeAt(i);
    if (code === 0x5c && i + 1 < n) {
      const next = json.charCodeAt(i + 1);
      if (next === 0x6e || next === 0x72) {
        // `\n` or `\r`: one break.
        if (take(BREAK, next === 0x6e)) return true;
        i++;
        continue;
      }
      if (next === 0x5c || next === 0x22) {
        // `\\` or `\"`: two characters, neither a break nor base64.
        if (take(OTHER, false)) return true;
        i++;
        continue;
      }
      // Another escape: the backslash stays, and the next character is read on its own.
      if (take(OTHER, false)) return true;
      continue;
    }
    if (code === 0x22 || code === 0x0a || code === 0x0d) {
      if (take(BREAK, code !== 0x0d)) return true;
    } else if (take(isBase64(code) ? BASE64 : OTHER, false)) return true;
  }
  return shift(EDGE);
}
