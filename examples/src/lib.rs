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
    let name = program();
    std::env::args().skip(1).map(move |a| {
        a.parse::<usize>()
            .unwrap_or_else(|_| bad_usage(&name, &format!("{a:?} is not a number"), usage))
    })
}

/// Argument `i` of the program (0: the first after its name) as a `T`, or `default` when it
/// is not given. One that does not parse ends the program as [`numbers`] does: one line naming
/// it, `what` it should be and `usage`, exit status 2.
///
/// ```no_run
/// let tolerance: f64 = mbsp_examples::arg(2, 1e-10, "a tolerance", "[MATRIX] [P] [TOL]");
/// ```
pub fn arg<T: std::str::FromStr>(i: usize, default: T, what: &str, usage: &str) -> T {
    match std::env::args().nth(i + 1) {
        None => default,
        Some(a) => a
            .parse()
            .unwrap_or_else(|_| bad_usage(&program(), &format!("{a:?} is not {what}"), usage)),
    }
}

/// Ends the program over a bad argument: one line, `problem` and the usage, exit status 2.
pub fn usage_error(problem: &str, usage: &str) -> ! {
    bad_usage(&program(), problem, usage)
}

/// What `main` returns through [`report`]: nothing, or an error of any kind.
pub type Outcome = Result<(), Box<dyn std::error::Error>>;

/// Ends `main` with its outcome: on an error, one line on stderr, the program's name, the
/// error's message and each of its causes that the message does not quote already
/// (`: `-separated; not the `Debug` form that a `main` returning `Result` prints), and exit
/// status 1.
///
/// ```no_run
/// fn run() -> mbsp_examples::Outcome {
///     let text = std::fs::read_to_string("input.txt")?;
///     println!("{} bytes", text.len());
///     Ok(())
/// }
/// fn main() -> std::process::ExitCode {
///     mbsp_examples::report(run())
/// }
/// ```
pub fn report(outcome: Outcome) -> std::process::ExitCode {
    let Err(e) = outcome else {
        return std::process::ExitCode::SUCCESS;
    };
    let mut line = format!("{}: {e}", program());
    let mut cause = e.source();
    while let Some(c) = cause {
        // Some errors' messages quote their cause already.
        let text = c.to_string();
        if !line.contains(&text) {
            line += &format!(": {text}");
        }
        cause = c.source();
    }
    eprintln!("{line}");
    std::process::ExitCode::FAILURE
}

/// The program's name: the last part of the path it was started by.
fn program() -> String {
    let program = std::env::args().next().unwrap_or_default();
    std::path::Path::new(&program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or(program)
}

fn bad_usage(name: &str, problem: &str, usage: &str) -> ! {
    eprintln!("{name}: {problem} (usage: {name} {usage})");
    std::process::exit(2)
}
