"""An author date as the ``<epoch> <tz>`` git writes, without a ``git var`` process a date where
git keeps it as it is (a raw date, or RFC 2822 exactly as git prints it); the rest is git's."""

from __future__ import annotations

import re
import time

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_ZONE = r"([+-])([01]\d|2[0-3])([0-5]\d)"  # git ignores a zone of 24 hours and more
_RAW = re.compile(r"@?(0|[1-9]\d*) " + _ZONE)
_RFC2822 = re.compile(r"[A-Z][a-z]{2}, (\d{1,2}) ([A-Z][a-z]{2}) (\d{4}) (\d\d):(\d\d):(\d\d) " + _ZONE)
# Within these bounds git's date parser reads a bare epoch as one (9 digits and
# more) and converts calendar dates (years 1970-2099) exactly.
_EPOCH_MIN, _EPOCH_MAX = 100_000_000, 4_102_444_800


def stamp(date: str) -> str | None:
    """``<epoch> <tz>`` as ``commit-tree`` would write ``date``, where that is certain; else None."""
    raw = _RAW.fullmatch(date)
    if raw:
        return _raw_stamp(date, raw)
    m = _RFC2822.fullmatch(date)
    if not m or m.group(2) not in _MONTHS:
        return None
    day, year, hour, minute, second = int(m.group(1)), int(m.group(3)), *map(int, m.group(4, 5, 6))
    sign, tz_hours, tz_minutes = m.group(7), int(m.group(8)), int(m.group(9))
    offset = (1 if sign == "+" else -1) * (tz_hours * 3600 + tz_minutes * 60)
    import calendar  # here: only a patch file's mail date is read this way, and start-up counts for a small check

    local = (year, _MONTHS.index(m.group(2)) + 1, day, hour, minute, second)
    epoch = calendar.timegm(local) - offset
    if not (0 <= epoch < _EPOCH_MAX and 1970 <= year < 2100) or rfc2822(epoch, offset) != date:
        return None  # a day or second out of range, a wrong weekday, "-0000": git decides
    return f"{epoch} {sign}{m.group(8)}{m.group(9)}"


def _raw_stamp(date: str, raw: re.Match[str]) -> str | None:
    epoch = int(raw.group(1))
    if raw.group(2, 3, 4) == ("-", "00", "00"):
        return None  # git writes "+0000"
    if date.startswith("@") or _EPOCH_MIN <= epoch < _EPOCH_MAX:
        return f"{epoch} {raw.group(2)}{raw.group(3)}{raw.group(4)}"
    return None


def rfc2822(epoch: int, offset: int) -> str:
    """The date as git prints it in RFC 2822 (``--date=rfc2822``: the day of month unpadded)."""
    t = time.gmtime(epoch + offset)
    zone = f"{'-' if offset < 0 else '+'}{abs(offset) // 3600:02d}{abs(offset) % 3600 // 60:02d}"
    return f"{_DAYS[t.tm_wday]}, {t.tm_mday} {_MONTHS[t.tm_mon - 1]} {t.tm_year} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} {zone}"
