//! `mdbook-lab`: the book's preprocessor, which fills `{{#result}}` and
//! `{{#figure}}` from the committed reference run. See `lab::book`.

fn main() -> std::process::ExitCode {
    labkit::error::report("mdbook-lab", lab::book::main(std::env::args().collect()))
}
