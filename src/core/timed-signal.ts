// A signal bounded by a parent signal and a time limit, whose timer is cleared
// when the work is done. AbortSignal.timeout's timer cannot be cleared: at
// thousands of checks a second, each one's timer, signal and listeners would
// live on for the whole limit (tens of seconds) after the check ended.

export interface TimedSignal {
  signal: AbortSignal;
  /** Clears the timer and lets go of the parent; call it once the signal is no longer needed. */
  dispose(): void;
}

/** Aborts with the parent's reason, or after `ms` with a TimeoutError DOMException, as AbortSignal.timeout would. */
export function timedSignal(parent: AbortSignal, ms: number): TimedSignal {
  const controller = new AbortController();
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { signal: controller.signal, dispose: () => undefined };
  }
  const follow = () => controller.abort(parent.reason);
  parent.addEventListener('abort', follow, { once: true });
  const timer = setTimeout(() => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), ms);
  timer.unref();
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      parent.removeEventListener('abort', follow);
    },
  };
}
