//! The colours of the plots the commands draw, as plain data (red, green, blue): each command
//! turns them into its plotting library's colour type.

/// The colours of a plot's lines or bars, in turn (distinct on white).
///
/// ```
/// use mbsp_tools::palette::{COLORS, color};
/// assert_eq!(COLORS[0], (31, 119, 180));
/// assert_eq!(color(COLORS.len() + 1), COLORS[1]);
/// ```
pub const COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// The colour of the `i`-th line or bar: the [`COLORS`] in turn, again from the first after
/// the last.
pub fn color(i: usize) -> (u8, u8, u8) {
    COLORS[i % COLORS.len()]
}
