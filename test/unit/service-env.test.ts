// ctx.serviceEnv (src/jobs/service-env.ts): OUTPOST=true on every run; CI=true only for test-triggered runs.

import { describe, expect, it } from 'vitest';
import { serviceEnvironment } from '../../src/jobs/service-env.js';

describe('serviceEnvironment', () => {
  it('marks every run with OUTPOST=true', () => {
    for (const trigger of ['SCHEDULER', 'API', 'DEPLOYMENT', 'MANUAL', 'TRIGGER', null, undefined, 'SOMETHING_NEW']) {
      expect(serviceEnvironment(trigger).OUTPOST).toBe('true');
    }
  });

  it('sets CI=true only for TEST_NO_RECORD and TEST_RECORD', () => {
    expect(serviceEnvironment('TEST_NO_RECORD')).toEqual({ OUTPOST: 'true', CI: 'true' });
    expect(serviceEnvironment('TEST_RECORD')).toEqual({ OUTPOST: 'true', CI: 'true' });
  });

  it('leaves CI absent (not "false") otherwise, including local and once runs (no trigger source)', () => {
    for (const trigger of ['SCHEDULER', 'API', 'DEPLOYMENT', 'MANUAL', 'TRIGGER', 'test_record', null, undefined]) {
      const env = serviceEnvironment(trigger);
      expect(env).toEqual({ OUTPOST: 'true' });
      expect('CI' in env).toBe(false);
    }
  });

  it('returns a fresh object each time (a runtime may add to it)', () => {
    const a = serviceEnvironment('SCHEDULER');
    a.EXTRA = 'x';
    expect(serviceEnvironment('SCHEDULER')).toEqual({ OUTPOST: 'true' });
  });
});
