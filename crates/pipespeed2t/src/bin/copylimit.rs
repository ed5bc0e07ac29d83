//! `copylimit BYTES`: see `pipespeed2t::copy`.

use pipespeed2t::copy::{self, Options};

fn main() -> std::process::ExitCode {
    labkit::cli::main("copylimit", |o: &Options| {
        labkit::cli::emit(o.json, &copy::run(&o.settings())?, copy::CopyReport::text)
    })
}
