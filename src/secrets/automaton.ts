// Aho–Corasick over the scrubber's patterns: time linear in the text plus the
// patterns, whatever their content. The scrubber's fast searches (a filtered
// hash index, V8's indexOf) re-read a pattern at every position where it
// might start, which is quadratic when text and secret repeat themselves
// (a secret of 100,000 `a` over 400 KB of `a`); they give up past a work
// budget and this automaton answers instead. It reads each symbol once and
// follows failure links (each step down a link undoes one step taken
// before), so repetitive patterns cost no backtracking.
//
// Symbols are UTF-16 code units (text) or bytes (buffers). A state's first
// transition sits in two arrays indexed by state (in a trie most states have
// one child, created right after them, so these reads are sequential); its
// others in one open-addressing hash table (state, symbol) → state; the
// root, whose transitions are read most, has a dense table.

/** Merged redaction runs, fed by intervals in order of their end (as the automaton finds them). */
export class EndOrderedRuns {
  readonly starts: number[] = [];
  readonly ends: number[] = [];

  /** Adds [start, end); `end` never decreases from one call to the next. Overlapping runs merge (touching ones do not). */
  add(start: number, end: number): void {
    const { starts, ends } = this;
    let s = start;
    while (ends.length > 0 && s < (ends[ends.length - 1] as number)) {
      s = Math.min(s, starts.pop() as number);
      ends.pop();
    }
    starts.push(s);
    ends.push(end);
  }
}

export class Automaton {
  private readonly rootNext: Int32Array;
  private readonly fail: Int32Array;
  /** Length of the longest pattern that ends at this state (0: none). */
  private readonly out: Int32Array;
  private readonly firstSymbol: Int32Array;
  private readonly firstTarget: Int32Array;
  /** 1 where a state has more transitions than its first, in the hash table. */
  private readonly more: Uint8Array;
  private readonly mask: number;
  private readonly keyState: Int32Array;
  private readonly keySymbol: Int32Array;
  private readonly value: Int32Array;

  /** `patterns` as arrays of symbols below `alphabet`. */
  constructor(patterns: ReadonlyArray<ArrayLike<number>>, alphabet: number) {
    let total = 1;
    for (const p of patterns) total += p.length;
    this.rootNext = new Int32Array(alphabet).fill(-1);
    this.fail = new Int32Array(total);
    this.out = new Int32Array(total);
    // Construction only: the symbol into each state, and each state's children as a list.
    const symbolOf = alphabet <= 0x10000 ? new Uint16Array(total) : new Int32Array(total);
    const firstChild = new Int32Array(total).fill(-1);
    const nextSibling = new Int32Array(total).fill(-1);
    this.firstSymbol = new Int32Array(total).fill(-1);
    this.firstTarget = new Int32Array(total);
    this.more = new Uint8Array(total);
    // A pattern adds at most one transition to a state that had one already (where it leaves the trie built so far).
    const capacity = 2 ** Math.ceil(Math.log2(Math.max(16, patterns.length * 2)));
    this.mask = capacity - 1;
    this.keyState = new Int32Array(capacity).fill(-1);
    this.keySymbol = new Int32Array(capacity);
    this.value = new Int32Array(capacity);
    let count = 1;
    for (const p of patterns) {
      let s = 0;
      for (let i = 0; i < p.length; i++) {
        const c = p[i] as number;
        let t = this.next(s, c);
        if (t < 0) {
          t = count++;
          this.set(s, c, t);
          symbolOf[t] = c;
          nextSibling[t] = firstChild[s] as number;
          firstChild[s] = t;
        }
        s = t;
      }
      if (s !== 0) this.out[s] = p.length;
    }
    // Breadth first: a state's failure link is the longest proper suffix of its string that is a state.
    const queue = new Int32Array(count);
    let head = 0;
    let tail = 0;
    for (let v = firstChild[0] as number; v !== -1; v = nextSibling[v] as number) queue[tail++] = v;
    while (head < tail) {
      const u = queue[head++] as number;
      for (let v = firstChild[u] as number; v !== -1; v = nextSibling[v] as number) {
        const c = symbolOf[v] as number;
        let f = this.fail[u] as number;
        let g = this.next(f, c);
        while (g < 0 && f !== 0) {
          f = this.fail[f] as number;
          g = this.next(f, c);
        }
        const link = Math.max(g, 0);
        this.fail[v] = link;
        if (this.out[v] === 0) this.out[v] = this.out[link] as number;
        queue[tail++] = v;
      }
    }
  }

  private slot(state: number, symbol: number): number {
    return (Math.imul(state, 0x9e3779b1) ^ Math.imul(symbol, 0x85ebca77)) & this.mask;
  }

  private next(state: number, symbol: number): number {
    if (state === 0) return this.rootNext[symbol] as number;
    if (this.firstSymbol[state] === symbol) return this.firstTarget[state] as number;
    if (this.more[state] === 0) return -1;
    const { keyState, keySymbol, value, mask } = this;
    for (let i = this.slot(state, symbol); ; i = (i + 1) & mask) {
      const k = keyState[i] as number;
      if (k === -1) return -1;
      if (k === state && keySymbol[i] === symbol) return value[i] as number;
    }
  }

  private set(state: number, symbol: number, child: number): void {
    if (state === 0) {
      this.rootNext[symbol] = child;
      return;
    }
    if (this.firstSymbol[state] === -1) {
      this.firstSymbol[state] = symbol;
      this.firstTarget[state] = child;
      return;
    }
    this.more[state] = 1;
    let i = this.slot(state, symbol);
    while (this.keyState[i] !== -1) i = (i + 1) & this.mask;
    this.keyState[i] = state;
    this.keySymbol[i] = symbol;
    this.value[i] = child;
  }

  /** The merged runs covered by any pattern in `length` symbols read by `at`. */
  scan(length: number, at: (i: number) => number): EndOrderedRuns {
    const runs = new EndOrderedRuns();
    const { fail, out } = this;
    let s = 0;
    for (let i = 0; i < length; i++) {
      const c = at(i);
      let t = this.next(s, c);
      while (t < 0 && s !== 0) {
        s = fail[s] as number;
        t = this.next(s, c);
      }
      s = Math.max(t, 0);
      const longest = out[s] as number;
      if (longest > 0) runs.add(i + 1 - longest, i + 1);
    }
    return runs;
  }
}
