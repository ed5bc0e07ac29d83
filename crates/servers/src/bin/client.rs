//! `client --addr A --children 5 --loops 500 --bytes 4000`: see
//! `servers::client`; its flags are [`servers::client::Options`].

fn main() -> std::process::ExitCode {
    labkit::cli::main("client", |o: &servers::client::Options| {
        servers::client::run(&o.config()).and_then(|report| {
            labkit::cli::emit(o.json, &report, servers::client::Report::text)?;
            match report.error_total {
                0 => Ok(()),
                n => Err(labkit::Error::failed(format!(
                    "{n} of {} connections failed or got a short or wrong reply",
                    n + report.connections_ok
                ))),
            }
        })
    })
}
