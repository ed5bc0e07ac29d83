//! `lab`: list and run the lab's experiments. See `lab --help`.

fn main() -> std::process::ExitCode {
    labkit::error::report("lab", lab::main(std::env::args_os().collect()))
}
