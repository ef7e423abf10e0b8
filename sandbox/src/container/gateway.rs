//! The run-time gateway check: before a server starts on its side's internal network, prgate
//! proves that the host does not answer there (each side's network, base's and the PR's, is
//! checked before its own server).
//!
//! An internal network has no route off it, but the host's own address on it (the gateway)
//! reaches every service of the host that listens on all interfaces, unless the node's
//! firewall drops new connections from the engine's bridges (`docs/container.md`,
//! "Network"). [`Engine::check_gateway`] does not trust that the rule is there: prgate (on
//! the host) listens on an ephemeral port of every interface, and a short-lived probe
//! container on the side's network (the node's image, bash's `/dev/tcp`) tries to connect to
//! the gateway at that port. Only a probe that ran and could not connect, while the listener
//! saw no connection, says [`GatewayCheck::Closed`]; anything else is
//! [`GatewayCheck::Open`] or an error (the caller cannot tell, and fails closed).

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::time::Duration;

use super::{
    COMMAND_TIMEOUT, Container, ContainerError, ContainerNetwork, ContainerRequest, Engine,
    EngineKind, side_network_name,
};
use crate::process::{Finished, tail};

/// How long the probe tries to connect (`timeout` in the probe): a dropped connection
/// attempt hangs until then; a refused one fails at once.
pub const PROBE_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the probe container may take in all (starting it, then the probe): more than
/// this and the check cannot tell.
pub const PROBE_LIMIT: Duration = Duration::from_secs(60);

/// The probe, run as `bash -c PROBE_SCRIPT prgate-probe GATEWAY PORT SECONDS`: it tries to
/// open a TCP connection to `GATEWAY:PORT` for at most `SECONDS` and says how that went on its
/// last line, `prgate-probe:connected` or `prgate-probe:failed:<status>` (124: timed out).
/// bash's `/dev/tcp` and coreutils' `timeout` are all it needs.
pub const PROBE_SCRIPT: &str = r#"if timeout "$3" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>&1; then echo prgate-probe:connected; else echo "prgate-probe:failed:$?"; fi"#;

/// What a failed connection attempt says when nothing on the host took it: the probe's
/// `timeout` ran out (a dropped SYN: status 124), or the kernel refused or had no route.
const NOT_REACHED: &[&str] = &[
    "Connection refused",
    "No route to host",
    "Network is unreachable",
    "Cannot assign requested address",
    "Connection timed out",
];

/// What the gateway check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayCheck {
    /// The probe could not connect to the gateway, and nothing reached the host's listener.
    Closed { gateway: IpAddr, port: u16, answer: String },
    /// The host answered on the side's network: a server there would reach the host's
    /// services.
    Open { gateway: IpAddr, port: u16, how: String },
}

impl fmt::Display for GatewayCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayCheck::Closed { gateway, port, answer } => write!(
                f,
                "the host is closed to the server's network: a probe there could not connect to the gateway {gateway} at port {port} ({answer})"
            ),
            GatewayCheck::Open { gateway, port, how } => write!(
                f,
                "the host answers on the server's network: a probe there connected to the gateway {gateway} at port {port} ({how}), so a server there would reach the host's services"
            ),
        }
    }
}

/// The fix for an open gateway (or one the check cannot judge): the node's firewall rule.
pub const GATEWAY_HINT: &str = "hint: the node's firewall must drop new connections from the engine's bridges to the host: `iptables -I INPUT -i podman+ -m conntrack --ctstate NEW -j DROP` (podman; `-i br-+` for docker's user networks), see docs/container.md, \"Network\"";

impl Engine {
    /// The gateway of network `network` (the host's address on it): `<engine> network
    /// inspect`, the first IPv4 one when it has several. No gateway is an error.
    pub fn network_gateway(&self, network: &str) -> Result<IpAddr, ContainerError> {
        let format = match self.kind {
            EngineKind::Podman => "{{range .Subnets}}{{.Gateway}} {{end}}",
            EngineKind::Docker => "{{range .IPAM.Config}}{{.Gateway}} {{end}}",
        };
        let command = ["network", "inspect", "--format", format, network];
        let output = self.output(&command, COMMAND_TIMEOUT)?;
        let gateways: Vec<IpAddr> = output
            .split_whitespace()
            .filter_map(|word| word.parse::<IpAddr>().ok())
            .filter(|address| !address.is_unspecified())
            .collect();
        gateways.iter().find(|gateway| gateway.is_ipv4()).or(gateways.first()).copied().ok_or_else(
            || ContainerError::Unexpected {
                engine: self.display(),
                command: command.join(" "),
                output: output.trim().to_owned(),
                expected: format!("the gateway of network {network}, such as 10.89.0.1"),
            },
        )
    }

    /// Checks that the host does not answer on a side's network (module docs): `request` is
    /// the probe container's (its network must be a [`ContainerNetwork::Side`], which must
    /// exist); its command is replaced by the probe's, its output goes to its log (which is
    /// emptied first). An error is a check that cannot tell (no gateway, the probe did not run,
    /// or said something else).
    pub fn check_gateway(
        &self,
        request: &ContainerRequest<'_>,
    ) -> Result<GatewayCheck, ContainerError> {
        let gateway = self.network_gateway(&probed_network(request)?)?;
        let every_interface = match gateway {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let listener = TcpListener::bind(SocketAddr::new(every_interface, 0)).map_err(|error| {
            ContainerError::GatewayProbe {
                gateway,
                problem: format!("cannot listen on the host: {error}"),
            }
        })?;
        self.probe_gateway(request, gateway, listener)
    }

    /// [`Engine::check_gateway`] with the gateway and the host's listener given: the probe
    /// connects to `gateway` at `listener`'s port (`listener` must take connections to the
    /// gateway: bound on every interface, or on the gateway).
    pub fn probe_gateway(
        &self,
        request: &ContainerRequest<'_>,
        gateway: IpAddr,
        listener: TcpListener,
    ) -> Result<GatewayCheck, ContainerError> {
        probed_network(request)?;
        let probe_error = |problem: String| ContainerError::GatewayProbe { gateway, problem };
        listener
            .set_nonblocking(true)
            .map_err(|error| probe_error(format!("cannot poll the listener: {error}")))?;
        let port = listener
            .local_addr()
            .map_err(|error| probe_error(format!("cannot read the listener's port: {error}")))?
            .port();
        // The log starts empty: only what this probe prints is read (a file or link left
        // there is removed, never followed).
        match std::fs::remove_file(request.log) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                return Err(probe_error(format!(
                    "cannot empty the probe's log {}: {error}",
                    request.log.display()
                )));
            }
            _ => {}
        }
        let command = probe_command(gateway, port);
        let probe = ContainerRequest { command: &command, gpus: &[], datasets: None, ..*request };
        let launch = self.launch(&probe)?;
        let mut container = Container::start(self, &launch)?;
        let finished = container.wait_with_timeout(PROBE_LIMIT);
        drop(container);
        // A connection the probe made waits in the listener's queue, whether or not the
        // probe saw it succeed.
        if let Some(peer) = accepted_peer(&listener)
            .map_err(|error| probe_error(format!("cannot read the listener: {error}")))?
        {
            return Ok(GatewayCheck::Open {
                gateway,
                port,
                how: format!("prgate's listener on the host accepted a connection from {peer}"),
            });
        }
        let answer = tail(request.log, 20)
            .map_err(|error| probe_error(format!("cannot read the probe's log: {error}")))?;
        probe_verdict(gateway, &finished?, &answer).map(|verdict| match verdict {
            Verdict::Connected => {
                GatewayCheck::Open { gateway, port, how: "the probe says it connected".to_owned() }
            }
            Verdict::NotReached(answer) => GatewayCheck::Closed { gateway, port, answer },
        })
    }
}

/// The network the probe of `request` checks: its side's; any other network is an error.
fn probed_network(request: &ContainerRequest<'_>) -> Result<String, ContainerError> {
    match request.network {
        ContainerNetwork::Side(side) => Ok(side_network_name(request.run, side)),
        other => Err(ContainerError::Request {
            what: "the gateway probe's network".to_owned(),
            value: format!("{other:?}"),
            problem: "must be a side's network of the run".to_owned(),
        }),
    }
}

/// The probe container's command line: [`PROBE_SCRIPT`] aimed at `gateway`'s `port`.
fn probe_command(gateway: IpAddr, port: u16) -> Vec<String> {
    [
        "bash",
        "-c",
        PROBE_SCRIPT,
        "prgate-probe",
        &gateway.to_string(),
        &port.to_string(),
        &PROBE_CONNECT_TIMEOUT.as_secs().to_string(),
    ]
    .map(str::to_owned)
    .into()
}

/// The peer of a connection waiting in `listener`'s queue (non-blocking), if there is one.
fn accepted_peer(listener: &TcpListener) -> io::Result<Option<SocketAddr>> {
    match listener.accept() {
        Ok((_stream, peer)) => Ok(Some(peer)),
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(error) => Err(error),
    }
}

/// What a probe that ended as `finished`, with `answer` the tail of its log, says about
/// `gateway`; an error when it ended badly or said something unclear.
fn probe_verdict(
    gateway: IpAddr,
    finished: &Finished,
    answer: &str,
) -> Result<Verdict, ContainerError> {
    let problem = match finished {
        Finished::Exited(status) if status.success() => {
            return classify(answer).map_err(|unclear| ContainerError::GatewayProbe {
                gateway,
                problem: unclear.to_string(),
            });
        }
        Finished::Exited(status) => format!("the probe ended with {status}: {answer}"),
        _ => format!("the probe did not end within {PROBE_LIMIT:?}: {answer}"),
    };
    Err(ContainerError::GatewayProbe { gateway, problem })
}

/// What the probe's output says.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Connected,
    /// It could not connect, and why (what it printed).
    NotReached(String),
}

/// The probe's output read: its last `prgate-probe:` line, and for a failure, a reason that is
/// the network's (a timeout, a refusal, no route), not the probe's own (no `/dev/tcp`, no
/// `timeout`). Anything else is an error: the output, cut.
fn classify(output: &str) -> Result<Verdict, Unclear> {
    let cut = || super::shorten(output.trim());
    let Some(last) =
        output.lines().rev().find_map(|line| line.trim().strip_prefix("prgate-probe:"))
    else {
        return Err(Unclear::NoVerdict(cut()));
    };
    if last == "connected" {
        return Ok(Verdict::Connected);
    }
    let Some(status) = last.strip_prefix("failed:") else {
        return Err(Unclear::UnknownVerdict { verdict: last.to_owned(), output: cut() });
    };
    if status == "124" {
        return Ok(Verdict::NotReached(format!("no answer within {PROBE_CONNECT_TIMEOUT:?}")));
    }
    match NOT_REACHED.iter().find(|reason| output.contains(*reason)) {
        Some(reason) => Ok(Verdict::NotReached((*reason).to_owned())),
        None => Err(Unclear::NotTheNetwork { status: status.to_owned(), output: cut() }),
    }
}

/// A probe's output that does not tell whether the network let it through: its words, cut.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum Unclear {
    #[error("the probe printed no verdict: {0}")]
    NoVerdict(String),
    #[error("the probe's verdict {verdict:?} is not one it gives: {output}")]
    UnknownVerdict { verdict: String, output: String },
    #[error("the probe failed ({status}) for a reason that is not the network's: {output}")]
    NotTheNetwork { status: String, output: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failure_of_the_network_reads_as_not_reached() {
        assert_eq!(classify("prgate-probe:connected\n"), Ok(Verdict::Connected));
        assert_eq!(
            classify("prgate-probe:failed:124\n"),
            Ok(Verdict::NotReached("no answer within 3s".to_owned()))
        );
        let refused = "bash: connect: Connection refused\nbash: line 1: /dev/tcp/10.89.0.1/41000: Connection refused\nprgate-probe:failed:1\n";
        assert_eq!(classify(refused), Ok(Verdict::NotReached("Connection refused".to_owned())));
        // No /dev/tcp in this bash, no timeout program, no verdict: cannot tell.
        let no_tcp =
            "bash: /dev/tcp/10.89.0.1/41000: No such file or directory\nprgate-probe:failed:1\n";
        let unclear = classify(no_tcp).expect_err("cannot tell").to_string();
        assert!(unclear.contains("not the network's"), "{unclear}");
        let no_timeout = "bash: line 1: timeout: command not found\nprgate-probe:failed:127\n";
        assert!(classify(no_timeout).is_err());
        assert!(classify("").expect_err("cannot tell").to_string().contains("no verdict"));
        assert!(classify("prgate-probe:maybe\n").is_err());
        // The last verdict counts: what a command printed before it does not.
        assert_eq!(
            classify("prgate-probe:failed:124\nprgate-probe:connected\n"),
            Ok(Verdict::Connected)
        );
    }
}
