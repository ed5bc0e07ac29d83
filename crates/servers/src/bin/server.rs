//! `server --design NAME`: see the crate documentation; its flags are
//! [`servers::Options`].

fn main() -> std::process::ExitCode {
    labkit::cli::main("server", |o: &servers::Options| {
        servers::run(&o.config()?).and_then(|stats| {
            labkit::cli::emit(o.json, &stats, servers::Stats::text)
        })
    })
}
