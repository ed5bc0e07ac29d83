//! `thread --threads N --count C --log PATH`: see the crate documentation;
//! its flags are [`thread::Options`].

fn main() -> std::process::ExitCode {
    labkit::cli::main("thread", |o: &thread::Options| {
        let result = thread::run(o.threads, o.stack_size, &o.work);
        labkit::cli::finish(result, &o.work)
    })
}
