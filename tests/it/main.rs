//! The workspace's cross-program integration tests, one module per
//! experiment or concern, in one test binary: each binary costs a link,
//! and the tests of one binary run in parallel (`cargo test --release -p
//! lab --test it -- book::` runs one module's).
//!
//! The tests of all modules share this process: a test that forks, counts
//! children, takes the CPUs or changes what belongs to the process (limits,
//! the working directory, the environment) holds [`labtest::serial`]; one
//! that needs the process to itself (a subreaper waiting for any child)
//! runs in a process of its own ([`labtest::alone`]).

mod book;
mod common;
mod create_destroy;
mod ctx_switch;
mod failures;
mod footprint;
mod fork_vs_thread;
mod interrupts;
mod lab;
mod mq_sweep;
mod pipe_speed;
mod runs;
mod server_designs;
mod thread_limits;
