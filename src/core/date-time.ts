// A strict RFC 3339 date-time (section 5.6): `2026-11-24T01:18:11Z`,
// `…T01:18:11.123+01:00`. Date.parse alone takes `2026` or `Nov 24 2026`, and
// rolls impossible dates over (`2026-02-30` is March 2nd, `T24:00:00` the next
// day): a time the server files or schedules by must mean what it says.
// The checks file's maintenance windows also take a date alone, a time
// without seconds and one without an offset (UTC) (docs/server.md
// "Maintenance windows"): `relaxed` allows those, with the same range checks.

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?([Zz]|[+-](\d{2}):(\d{2}))?)?$/;

export interface DateTimeForms {
  /** Also a date alone (midnight UTC), a time without seconds, a date-time without an offset (UTC). */
  relaxed?: boolean;
}

/** Date.UTC(year, …) with a four-digit year taken as written (Date.UTC reads 0–99 as 1900–1999). */
function utc(year: number, monthIndex: number, day: number): number {
  const date = new Date(Date.UTC(2000, monthIndex, day));
  date.setUTCFullYear(year, monthIndex, day);
  return date.getTime();
}

function daysIn(year: number, month: number): number {
  return new Date(utc(year, month, 0)).getUTCDate();
}

/** Milliseconds since the epoch, or undefined when `text` is not a date-time of the forms allowed (leap seconds are not taken). */
export function parseDateTime(text: string, forms: DateTimeForms = {}): number | undefined {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, fraction, zone, zoneHours, zoneMinutes] = m;
  if (!forms.relaxed && (s === undefined || zone === undefined)) return undefined;
  const [year, month, day] = [Number(y), Number(mo), Number(d)];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined;
  if (Number(h ?? 0) > 23 || Number(mi ?? 0) > 59 || Number(s ?? 0) > 59) return undefined;
  if (zone !== undefined && (Number(zoneHours ?? 0) > 23 || Number(zoneMinutes ?? 0) > 59)) return undefined;
  if (h === undefined) return utc(year, month - 1, day);
  // Checked field by field above, so Date.parse only does the arithmetic; no offset is UTC.
  const normal = `${y}-${mo}-${d}T${h}:${mi}:${s ?? '00'}${fraction ? fraction.slice(0, 4) : ''}${zone === undefined ? 'Z' : zone.toUpperCase()}`;
  const ms = Date.parse(normal);
  return Number.isFinite(ms) ? ms : undefined;
}
