//! `stacklimit threads|forks|overflow`: see the crate documentation; its
//! flags are [`stacklimit::Options`].

use stacklimit::{Options, Probe};

fn main() -> std::process::ExitCode {
    labkit::cli::main("stacklimit", |o: &Options| match &o.probe {
        Probe::Threads { stack_size, api, max, json } => {
            stacklimit::threads(*api, *stack_size, *max)
                .and_then(|c| show(&c, *json))
        }
        Probe::Forks { max, json } => {
            stacklimit::forks(*max).and_then(|c| show(&c, *json))
        }
        Probe::Overflow { stack_size, api } => {
            stacklimit::overflow(*api, *stack_size)
        }
    })
}

fn show(count: &stacklimit::Count, json: bool) -> labkit::Result<()> {
    labkit::cli::emit(json, count, |c| c.summary() + "\n")
}
