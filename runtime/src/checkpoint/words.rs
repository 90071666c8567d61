//! Words for an all-gather over ranks (`Engine::all_gather`): bytes as their length and then
//! packed 8 to a word; a part's report.

use super::format::Report;

/// Append `b`.
pub(crate) fn put(w: &mut Vec<u64>, b: &[u8]) {
    w.push(b.len() as u64);
    w.extend(b.chunks(8).map(|c| {
        let mut x = [0u8; 8];
        x[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(x)
    }));
}

/// The bytes at `*at` (moved past them); empty if the words end first.
pub(crate) fn take(w: &[u64], at: &mut usize) -> Vec<u8> {
    let Some(&n) = w.get(*at) else {
        return Vec::new();
    };
    let n = n as usize;
    let k = n.div_ceil(8);
    let Some(words) = w.get(*at + 1..*at + 1 + k) else {
        *at = w.len();
        return Vec::new();
    };
    *at += 1 + k;
    let mut out: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
    out.truncate(n);
    out
}

/// A report as words.
pub(crate) fn report(r: &Report) -> Vec<u64> {
    let mut w = Vec::new();
    match r {
        Ok((len, crc)) => w.extend([0, *len, u64::from(*crc)]),
        Err(why) => {
            w.push(1);
            put(&mut w, why.as_bytes());
        }
    }
    w
}

/// A report from words.
pub(crate) fn read_report(w: &[u64]) -> Report {
    match w.first() {
        Some(0) if w.len() >= 3 => Ok((w[1], w[2] as u32)),
        _ => {
            let mut at = 1;
            Err(String::from_utf8_lossy(&take(w, &mut at)).into_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_reports_read_back_as_written() {
        let mut w = Vec::new();
        let items: Vec<Vec<u8>> = (0..20u8).map(|n| (0..n).collect()).collect();
        for b in &items {
            put(&mut w, b);
        }
        let mut at = 0;
        for b in &items {
            assert_eq!(&take(&w, &mut at), b);
        }
        assert_eq!(at, w.len());
        assert!(take(&w, &mut at).is_empty(), "past the end: nothing");
        for r in [Ok((123, 0xdead_beef)), Err("part-3: disk full".to_string())] {
            assert_eq!(read_report(&report(&r)), r);
        }
    }
}
