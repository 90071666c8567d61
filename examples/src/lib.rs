//! Example programs live in src/bin; this library holds what they share.

/// The program's arguments as numbers, in order. An argument that is not a non-negative
/// integer ends the program with one line naming it and `usage` (the program's arguments,
/// e.g. `[N] [P] [STEPS]`), exit status 2, as the `mbsp` command does with bad arguments.
///
/// ```no_run
/// let mut args = mbsp_examples::numbers("[N] [P]");
/// let n = args.next().unwrap_or(1000);
/// let p = args.next().unwrap_or_else(mbsp::nprocs);
/// ```
pub fn numbers(usage: &'static str) -> impl Iterator<Item = usize> {
    let mut all = std::env::args();
    let program = all.next().unwrap_or_default();
    let name = std::path::Path::new(&program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or(program);
    all.map(move |a| {
        a.parse::<usize>().unwrap_or_else(|_| {
            eprintln!("{name}: {a:?} is not a number (usage: {name} {usage})");
            std::process::exit(2)
        })
    })
}
