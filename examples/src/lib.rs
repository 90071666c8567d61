//! Example programs live in src/bin.
