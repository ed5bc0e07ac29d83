//! `fork --procs N --count C --log PATH`: see the crate documentation; its
//! flags are [`fork::Options`].

fn main() -> std::process::ExitCode {
    labkit::cli::main("fork", |o: &fork::Options| {
        labkit::cli::finish(fork::run(o.procs, &o.work), &o.work)
    })
}
