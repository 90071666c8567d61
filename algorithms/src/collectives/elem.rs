//! The element type of a collective call, as its headers carry it.
//!
//! Sizes alone do not tell `f64` from `u64`: an all-reduce on `f64` on one process and on
//! `u64` on another would combine bit patterns of one type as the other and return garbage on
//! both. Every header therefore carries a fingerprint of the element type: a hash of its
//! [`TypeId`], which is the same in every thread of a program and in every rank of an SPMD
//! program over MPI (one binary). For errors, the fingerprints this process has met are
//! mapped back to type names (`std::any::type_name`); a type only another rank used is
//! described by its size.

use std::any::TypeId;
use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// The fingerprint of `T`'s type (64 bits of its `TypeId`).
pub fn fingerprint<T: 'static>() -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    TypeId::of::<T>().hash(&mut h);
    let tag = h.0;
    remember::<T>(tag);
    tag
}

/// The name of the type with fingerprint `tag`, if this process has met it.
pub fn name_of(tag: u64) -> Option<&'static str> {
    let names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    names.iter().find(|(t, _)| *t == tag).map(|(_, n)| *n)
}

/// `"u64 (8 bytes)"`, or `"an element type of 8 bytes"` when the name is unknown here.
pub fn describe(tag: u64, size: u32) -> String {
    describe_name(name_of(tag), size)
}

/// The 32 bits of a fingerprint that a level-1 collective's message header carries (a header
/// of three words rides in a barrier line with two words of data). Among the few element
/// types a program passes to collectives, two that agree in these bits are as unlikely as a
/// random 32-bit collision; a `Comm`'s slots keep all 64.
pub fn fold(tag: u64) -> u32 {
    (tag ^ tag >> 32) as u32
}

/// [`describe`] for a folded fingerprint.
pub fn describe_folded(folded: u32, size: u32) -> String {
    let names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let name = names
        .iter()
        .find(|(t, _)| fold(*t) == folded)
        .map(|(_, n)| *n);
    drop(names);
    describe_name(name, size)
}

fn describe_name(name: Option<&str>, size: u32) -> String {
    match name {
        Some(name) => format!("{name} ({size} bytes)"),
        None => format!("an element type of {size} bytes"),
    }
}

/// Fingerprints met so far, with their type names (a handful per program).
static NAMES: Mutex<Vec<(u64, &'static str)>> = Mutex::new(Vec::new());

thread_local! {
    /// The last fingerprint this thread recorded: a loop of collectives on one type takes the
    /// lock once.
    static LAST: Cell<u64> = const { Cell::new(0) };
}

fn remember<T: 'static>(tag: u64) {
    if LAST.with(Cell::get) == tag {
        return;
    }
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if !names.iter().any(|(t, _)| *t == tag) {
        names.push((tag, std::any::type_name::<T>()));
    }
    LAST.with(|l| l.set(tag));
}

/// FNV-1a over whatever `TypeId`'s `Hash` writes (its layout is private; its hash input is
/// the same for the same type in one binary).
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_of_one_size_differ_and_names_come_back() {
        let (f, u, i) = (
            fingerprint::<f64>(),
            fingerprint::<u64>(),
            fingerprint::<i64>(),
        );
        assert!(f != u && u != i && f != i);
        assert_eq!(fingerprint::<f64>(), f, "stable");
        assert_eq!(name_of(f), Some("f64"));
        assert_eq!(describe(u, 8), "u64 (8 bytes)");
        assert_eq!(describe(12345, 4), "an element type of 4 bytes");
        assert_eq!(describe_folded(fold(u), 8), "u64 (8 bytes)");
        assert_ne!(fold(f), fold(u));
        assert_eq!(describe_folded(12345, 4), "an element type of 4 bytes");
        // Recorded once per thread and type, from any thread.
        let t = std::thread::spawn(fingerprint::<[u16; 3]>).join().unwrap();
        assert_eq!(name_of(t), Some("[u16; 3]"));
    }
}
