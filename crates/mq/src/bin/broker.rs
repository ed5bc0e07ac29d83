//! `broker --readers R --writers W --deliverers D --queues Q`: see the
//! crate documentation; its flags are [`mq::Options`].

fn main() -> std::process::ExitCode {
    labkit::cli::main("broker", |o: &mq::Options| {
        mq::run(&o.config())
            .and_then(|stats| labkit::cli::emit(o.json, &stats, |s| s.line() + "\n"))
    })
}
