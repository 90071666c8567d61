//! The entry lines of a block: `row col [value]`, 1-based, checked against the header.

use super::blocks::Block;
use super::error::{Axis, MtxErrorKind};
use super::header::Field;
use super::shown;

/// Per-file facts every block parser needs.
pub(super) struct Facts {
    pub(super) field: Field,
    pub(super) skew: bool,
    pub(super) rows: u64,
    pub(super) cols: u64,
}

/// Parses the entry lines of one block (whole lines; the last may lack its `\n`).
///
/// Each line first goes through a byte-level fast path for the usual layout (`i j value` with
/// single spaces or tabs, plain decimal numbers); anything else, including every malformed
/// line, goes through the token-based slow path, which accepts everything valid and says
/// exactly what is wrong with the rest.
pub(super) fn parse_block(buf: &[u8], facts: &Facts) -> Block {
    // ~22 bytes per line in typical files: reserving for that avoids most regrowth.
    let mut b = Block {
        entries: Vec::with_capacity(buf.len() / 16),
        lines: 0,
        skipped: Vec::new(),
        error: None,
    };
    let mut p = 0;
    while p < buf.len() {
        let (entry, next) = match fast_line(buf, p, facts.field) {
            Some((i, j, v, next)) => (Ok(Some((i, j, v))), next),
            None => {
                let end = buf[p..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(buf.len(), |k| p + k);
                (slow_line(&buf[p..end], facts.field), end + 1)
            }
        };
        let checked = entry.and_then(|e| match e {
            Some((i, j, v)) => check_entry(i, j, facts).map(|(i, j)| Some((i, j, v))),
            None => Ok(None),
        });
        match checked {
            Ok(Some(e)) => b.entries.push(e),
            Ok(None) => b.skipped.push(b.lines),
            Err(kind) => {
                b.error = Some((b.lines, kind));
                return b;
            }
        }
        b.lines += 1;
        p = next;
    }
    b
}

/// Range checks of a 1-based entry; returns the 0-based indices.
#[inline]
fn check_entry(i: u64, j: u64, facts: &Facts) -> Result<(u32, u32), MtxErrorKind> {
    if i == 0 || i > facts.rows {
        return Err(MtxErrorKind::IndexOutOfRange {
            axis: Axis::Row,
            index: i,
            bound: facts.rows as usize,
        });
    }
    if j == 0 || j > facts.cols {
        return Err(MtxErrorKind::IndexOutOfRange {
            axis: Axis::Column,
            index: j,
            bound: facts.cols as usize,
        });
    }
    if facts.skew && i == j {
        return Err(MtxErrorKind::SkewDiagonal { index: i });
    }
    // In range 1..=u32::MAX, so the 0-based index fits in u32.
    Ok(((i - 1) as u32, (j - 1) as u32))
}

/// Fast path for one entry line starting at `p`: `Some((i, j, value, start of next line))`, or
/// `None` to hand the line to [`slow_line`]. Never accepts a line the slow path would reject,
/// and gives the same values.
#[inline(always)]
fn fast_line(b: &[u8], p: usize, field: Field) -> Option<(u64, u64, f64, usize)> {
    let (i, p) = fast_uint(b, p)?;
    let p = fast_sep(b, p)?;
    let (j, p) = fast_uint(b, p)?;
    let (v, p) = match field {
        Field::Pattern => (1.0, p),
        Field::Real => fast_f64(b, fast_sep(b, p)?)?,
        Field::Integer => fast_int(b, fast_sep(b, p)?)?,
        Field::Complex => {
            let (re, p) = fast_f64(b, fast_sep(b, p)?)?;
            let (_im, p) = fast_f64(b, fast_sep(b, p)?)?;
            (re, p)
        }
    };
    // Trailing blanks, then the line end.
    let mut p = p;
    while p < b.len() && matches!(b[p], b' ' | b'\t' | b'\r') {
        p += 1;
    }
    match b.get(p) {
        None => Some((i, j, v, p)),
        Some(b'\n') => Some((i, j, v, p + 1)),
        Some(_) => None,
    }
}

/// One or more spaces or tabs.
#[inline(always)]
fn fast_sep(b: &[u8], mut p: usize) -> Option<usize> {
    let start = p;
    while p < b.len() && matches!(b[p], b' ' | b'\t') {
        p += 1;
    }
    (p > start).then_some(p)
}

/// The decimal digits from `p` on, accumulated into `w` (wrapping: callers reject more than 19
/// digits, which is when it could wrap); returns `w` and the end of the digits.
#[inline(always)]
fn digits(b: &[u8], mut p: usize, mut w: u64) -> (u64, usize) {
    while let Some(&c) = b.get(p) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        w = w.wrapping_mul(10).wrapping_add(u64::from(d));
        p += 1;
    }
    (w, p)
}

/// 1 to 19 decimal digits (19 always fit in a u64).
#[inline(always)]
fn fast_uint(b: &[u8], p: usize) -> Option<(u64, usize)> {
    let (x, q) = digits(b, p, 0);
    (1..=19).contains(&(q - p)).then_some((x, q))
}

/// An optionally signed integer of up to 19 digits, as the nearest f64 (what `parse::<f64>`
/// gives, since both round to nearest, ties to even).
#[inline(always)]
fn fast_int(b: &[u8], p: usize) -> Option<(f64, usize)> {
    let (neg, p) = sign(b, p);
    let (x, q) = fast_uint(b, p)?;
    let v = x as f64;
    Some((if neg { -v } else { v }, q))
}

#[inline(always)]
fn sign(b: &[u8], p: usize) -> (bool, usize) {
    match b.get(p) {
        Some(b'-') => (true, p + 1),
        Some(b'+') => (false, p + 1),
        _ => (false, p),
    }
}

/// Exact powers of ten: every one up to 10^22 is representable in an f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Decimal floats `[+-]digits[.digits][(e|E)[+-]digits]` whose digits form an integer
/// `w <= 2^53` and whose decimal exponent `e` is in `-22..=22`: then `w` and `10^|e|` are exact
/// f64s and one IEEE multiplication or division rounds the exact value `w * 10^e` correctly
/// (Clinger's fast path), which is what `str::parse` returns. Anything else (long mantissas,
/// large exponents, `inf`, `nan`, malformed tokens) returns `None`.
#[inline(always)]
fn fast_f64(b: &[u8], p: usize) -> Option<(f64, usize)> {
    let (neg, p0) = sign(b, p);
    let (w, p1) = digits(b, p0, 0);
    let (w, mut p, frac) = if b.get(p1) == Some(&b'.') {
        let (w, p2) = digits(b, p1 + 1, w);
        (w, p2, p2 - p1 - 1)
    } else {
        (w, p1, 0)
    };
    // Leading zeros count too: rare, and they only send the token to `str::parse`.
    let n = p1 - p0 + frac;
    if n == 0 || n > 19 {
        return None;
    }
    let mut e = -(frac as i32);
    if matches!(b.get(p), Some(b'e' | b'E')) {
        let (eneg, q) = sign(b, p + 1);
        let (x, q2) = digits(b, q, 0);
        if !(1..=4).contains(&(q2 - q)) {
            return None;
        }
        e += if eneg { -(x as i32) } else { x as i32 };
        p = q2;
    }
    let v = if w == 0 {
        0.0
    } else if w > 1 << 53 {
        return None;
    } else if (0..=22).contains(&e) {
        w as f64 * POW10[e as usize]
    } else if (-22..0).contains(&e) {
        w as f64 / POW10[(-e) as usize]
    } else {
        return None;
    };
    Some((if neg { -v } else { v }, p))
}

/// The general line parser: `Ok(None)` for a blank or comment line, the 1-based entry, or
/// exactly what is wrong.
fn slow_line(line: &[u8], field: Field) -> Result<Option<(u64, u64, f64)>, MtxErrorKind> {
    let toks: Vec<&[u8]> = line
        .split(|c| c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    if toks.is_empty() || toks[0].starts_with(b"%") {
        return Ok(None);
    }
    if toks.len() != field.width() {
        return Err(MtxErrorKind::FieldCount {
            expected: field.width(),
            found: toks.len(),
            field,
        });
    }
    let index = |t: &[u8], axis| {
        std::str::from_utf8(t)
            .ok()
            .filter(|s| s.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| MtxErrorKind::BadIndex {
                axis,
                token: shown(t),
            })
    };
    let i = index(toks[0], Axis::Row)?;
    let j = index(toks[1], Axis::Column)?;
    let value = |t: &[u8]| {
        let s = std::str::from_utf8(t).ok();
        let s = if field == Field::Integer {
            // Integer values: an optional sign and digits only.
            s.filter(|s| {
                let d = s.strip_prefix(['-', '+']).unwrap_or(s);
                !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
            })
        } else {
            s
        };
        s.and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| MtxErrorKind::BadValue {
                token: shown(t),
                field,
            })
    };
    let v = match field {
        Field::Pattern => 1.0,
        Field::Real | Field::Integer => value(toks[2])?,
        Field::Complex => {
            value(toks[3])?; // the imaginary part must be a number too
            value(toks[2])?
        }
    };
    Ok(Some((i, j, v)))
}
