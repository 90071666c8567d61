//! Matrix Market reader (being written).
