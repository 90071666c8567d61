//! Mondriaan file formats (being written).
