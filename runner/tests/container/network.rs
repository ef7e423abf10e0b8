//! The sides' networks: a server reached on its side's network from the host and reaching
//! nothing else, the PR's side unable to reach base's server while the host reaches both, and
//! the gateway check finding the host closed (and open when a firewall hole lets it answer).

use super::*;

/// A port that is free on this host now.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn http_get(address: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream =
        TcpStream::connect_timeout(&address, Duration::from_secs(10)).expect("it connects");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    answer
}

/// What the probe of [`a_server_is_reached_on_the_runs_network_and_reaches_nothing_else`]
/// tries from the server's network namespace: every `host:port` of its arguments, then a name
/// lookup. Writes `{"host:port": "connected" | the error}` to `<out>/reach.json`.
const REACH: &str = r#"import json, socket, sys
result = {}
for target in sys.argv[2:]:
    host, port = target.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.settimeout(3)
    try:
        sock.connect((host, int(port)))
        result[target] = "connected"
    except OSError as error:
        result[target] = repr(error)
    finally:
        sock.close()
try:
    socket.setdefaulttimeout(3)
    result["dns:example.com"] = "resolved %s" % socket.gethostbyname("example.com")
except OSError as error:
    result["dns:example.com"] = repr(error)
with open(sys.argv[1], "w") as file:
    json.dump(result, file)
"#;

/// The host's IPv4 addresses other than loopback (`ip -o -4 addr show`): what a container
/// could try to reach the node's services at.
fn host_addresses() -> Vec<String> {
    let output = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .expect("`ip` (iproute2) lists the host's addresses");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|word| *word == "inet")?;
            words.get(at + 1)?.split('/').next().map(str::to_owned)
        })
        .filter(|address| !address.starts_with("127."))
        .collect()
}

/// A network's gateway: the host's own address on it.
fn gateway(harness: &Harness, network: &str) -> String {
    let format = match harness.engine.kind() {
        EngineKind::Podman => "{{range .Subnets}}{{.Gateway}}{{end}}",
        EngineKind::Docker => "{{range .IPAM.Config}}{{.Gateway}}{{end}}",
    };
    let output = harness.client(&["network", "inspect", "--format", format, network]);
    assert!(output.status.success(), "network inspect {network}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Removes a run's containers and networks when dropped.
struct RunCleanup<'a> {
    engine: &'a Engine,
    run: &'a RunId,
}

impl Drop for RunCleanup<'_> {
    fn drop(&mut self) {
        let _containers = self.engine.remove_run(self.run);
        let _networks = self.engine.remove_run_networks(self.run);
    }
}

#[test]
fn a_server_is_reached_on_the_runs_network_and_reaches_nothing_else() {
    for_each_engine(|harness| {
        let site = Site::new();
        std::fs::write(site.tree.join("reach.py"), REACH).expect("the reach probe");
        let node = harness.node(&site);
        let run = run_id("network");
        // Removed however the test ends, so that a failed assertion leaves no network behind
        // for `.ci/e2e-container`'s check.
        let _cleanup = RunCleanup { engine: &harness.engine, run: &run };
        let network =
            harness.engine.create_side_network(&run, NetworkSide::Pr).expect("the PR's network");
        assert_eq!(network, side_network_name(&run, NetworkSide::Pr));
        assert_eq!(
            harness.engine.create_side_network(&run, NetworkSide::Pr).expect("taken as it is"),
            network
        );

        // The stand-in runs the server on the host, so its container port must be free here;
        // in a real container it listens on every interface of its own namespace.
        let (port, bind) =
            if harness.real() { (8000, "0.0.0.0") } else { (free_port(), "127.0.0.1") };
        let port_text = port.to_string();
        let step = Step {
            purpose: "pr-server",
            gpus: &[],
            network: ContainerNetwork::Side(NetworkSide::Pr),
            env: ContainerEnv::new(&node),
            command: strings(&["python3", "-m", "http.server", &port_text, "--bind", bind]),
        };
        let server_launch = launch(harness, &site, &node, &run, &step);
        let args = argv(&server_launch);
        assert_isolated(&args, &node, &run, &step.command);
        assert_eq!(values(&args, "--network"), [network.as_str()]);

        // The host (prgate's health check and clients) reaches it at its address there.
        let mut container = Container::start(&harness.engine, &server_launch).expect("it starts");
        let address =
            container.wait_address(&network, Duration::from_secs(60)).expect("an address on it");
        assert!(!address.is_unspecified(), "{address}");
        let url = format!("http://{address}:{port}/hello.txt");
        wait_healthy(&url, Duration::from_secs(60), container.client()).expect("the server is up");
        let answer = http_get(std::net::SocketAddr::new(address, port), "/hello.txt");
        assert!(answer.contains("hello from the tree"), "{answer}");

        // A client in the server's namespace reaches it on its loopback.
        let fetch = format!(
            "import sys, urllib.request; open(sys.argv[1], 'wb').write(urllib.request.urlopen('http://127.0.0.1:{port}/hello.txt', timeout=30).read())"
        );
        let client = Step {
            purpose: "pr-serving-tests",
            gpus: &[],
            network: ContainerNetwork::JoinedTo(container.name()),
            env: ContainerEnv::new(&node),
            command: strings(&["python3", "-c", &fetch, "/work/out/client.txt"]),
        };
        let client_launch = launch(harness, &site, &node, &run, &client);
        assert_isolated(&argv(&client_launch), &node, &run, &client.command);
        assert_eq!(run_to_end(harness, &site, &client_launch), 0, "{}", site.logs());
        let fetched = std::fs::read_to_string(site.out.join("client.txt")).expect("it fetched");
        assert_eq!(fetched, "hello from the tree");

        if harness.real() {
            // From the server's namespace: no node service on the host's loopback, on any of
            // the host's addresses (its address on the PR's network, the gateway, among
            // them), nor an outside address, nor a name lookup.
            let loopback = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a host service");
            let wildcard = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("a host service");
            let any_port = wildcard.local_addr().expect("its address").port();
            let gateway = gateway(harness, &network);
            let mut targets = vec![
                format!("127.0.0.1:{}", loopback.local_addr().expect("its address").port()),
                format!("{gateway}:{any_port}"),
                "1.1.1.1:80".to_owned(),
                "8.8.8.8:53".to_owned(),
            ];
            targets.extend(host_addresses().into_iter().map(|host| format!("{host}:{any_port}")));
            let mut command = strings(&["python3", "reach.py", "/work/out/reach.json"]);
            command.extend(targets.iter().cloned());
            let probe = Step {
                purpose: "pr-reach",
                gpus: &[],
                network: ContainerNetwork::JoinedTo(container.name()),
                env: ContainerEnv::new(&node),
                command,
            };
            let probe_launch = launch(harness, &site, &node, &run, &probe);
            assert_eq!(run_to_end(harness, &site, &probe_launch), 0, "{}", site.logs());
            let reach: Value = serde_json::from_str(
                &std::fs::read_to_string(site.out.join("reach.json")).expect("the probe wrote"),
            )
            .expect("its JSON");
            let reached: Vec<String> = reach
                .as_object()
                .expect("an object")
                .iter()
                .filter(|(_, outcome)| {
                    outcome
                        .as_str()
                        .is_some_and(|text| text == "connected" || text.starts_with("resolved"))
                })
                .map(|(target, _)| target.clone())
                .collect();
            assert!(
                reached.is_empty(),
                "the server's namespace reached {reached:?} (all of it: {reach})\nhint: the \
                 host's address on a side's network answers unless the node's firewall drops \
                 new connections from it (docs/container.md, \"Network\"; .ci/engine-up)"
            );
            for listener in [&loopback, &wildcard] {
                listener.set_nonblocking(true).expect("non-blocking");
                assert!(listener.accept().is_err(), "a host service was reached");
            }
        }

        let name = container.name().to_owned();
        container.stop().expect("it stops");
        assert!(!harness.exists(&name), "the container is gone");
        assert_eq!(harness.engine.remove_run_networks(&run).expect("removed"), vec![network]);
        assert!(harness.engine.remove_run_networks(&run).expect("again").is_empty());
    });
}

/// What the probe of [`the_prs_side_cannot_reach_bases_server_and_the_host_reaches_both`] tries:
/// a TCP connection to every `address:port` of its arguments, for at most 3 seconds each.
/// Writes `{"address:port": ["connected" | the error, seconds taken]}` to its first argument.
const CONNECT: &str = r#"import json, socket, sys, time
result = {}
for target in sys.argv[2:]:
    host, port = target.rsplit(":", 1)
    started = time.monotonic()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.settimeout(3)
    try:
        sock.connect((host, int(port)))
        outcome = "connected"
    except OSError as error:
        outcome = repr(error)
    finally:
        sock.close()
    result[target] = [outcome, round(time.monotonic() - started, 3)]
with open(sys.argv[1], "w") as file:
    json.dump(result, file)
"#;

/// A server of `side` (`python3 -m http.server`) started on its side's network `network` and
/// healthy; returns it, its address and its port. The host reaches it there.
fn side_server(
    harness: &Harness,
    site: &Site,
    node: &NodeProfile,
    run: &RunId,
    (side, network): (NetworkSide, &str),
) -> (Container, std::net::IpAddr, u16) {
    // The stand-in runs the server on the host, so its port must be free here.
    let (port, bind) = if harness.real() { (8000, "0.0.0.0") } else { (free_port(), "127.0.0.1") };
    let port_text = port.to_string();
    let purpose = format!("{side}-server");
    let step = Step {
        purpose: &purpose,
        gpus: &[],
        network: ContainerNetwork::Side(side),
        env: ContainerEnv::new(node),
        command: strings(&["python3", "-m", "http.server", &port_text, "--bind", bind]),
    };
    let server_launch = launch(harness, site, node, run, &step);
    let args = argv(&server_launch);
    assert_isolated(&args, node, run, &step.command);
    assert_eq!(values(&args, "--network"), [network], "{side}'s server is on {side}'s network");
    let mut container = Container::start(&harness.engine, &server_launch).expect("it starts");
    let address =
        container.wait_address(network, Duration::from_secs(60)).expect("an address on it");
    let url = format!("http://{address}:{port}/hello.txt");
    wait_healthy(&url, Duration::from_secs(60), container.client()).expect("the server is up");
    let answer = http_get(std::net::SocketAddr::new(address, port), "/hello.txt");
    assert!(answer.contains("hello from the tree"), "the host reaches {side}'s server: {answer}");
    (container, address, port)
}

/// Base's and the PR's servers are on networks of their own: from the PR's side (a container on
/// its network, where the PR's server and what joins it are) base's server does not answer
/// (refused, unreachable or silent, within the probe's 3 seconds), while the PR's own server
/// does; the host reaches both.
#[test]
fn the_prs_side_cannot_reach_bases_server_and_the_host_reaches_both() {
    for_each_engine(|harness| {
        let site = Site::new();
        std::fs::write(site.tree.join("connect.py"), CONNECT).expect("the connect probe");
        let node = harness.node(&site);
        let run = run_id("sides");
        let _cleanup = RunCleanup { engine: &harness.engine, run: &run };
        let [base_network, pr_network] = [NetworkSide::Base, NetworkSide::Pr]
            .map(|side| harness.engine.create_side_network(&run, side).expect("a side's network"));
        assert_ne!(base_network, pr_network, "each side has a network of its own");

        let (base, base_address, base_port) =
            side_server(harness, &site, &node, &run, (NetworkSide::Base, &base_network));
        let (pr, pr_address, pr_port) =
            side_server(harness, &site, &node, &run, (NetworkSide::Pr, &pr_network));

        if harness.real() {
            let base_target = std::net::SocketAddr::new(base_address, base_port).to_string();
            let pr_target = std::net::SocketAddr::new(pr_address, pr_port).to_string();
            let mut command = strings(&["python3", "connect.py", "/work/out/connect.json"]);
            command.extend([base_target.clone(), pr_target.clone()]);
            let probe = Step {
                purpose: "pr-reach-base",
                gpus: &[],
                network: ContainerNetwork::Side(NetworkSide::Pr),
                env: ContainerEnv::new(&node),
                command,
            };
            let probe_launch = launch(harness, &site, &node, &run, &probe);
            assert_eq!(run_to_end(harness, &site, &probe_launch), 0, "{}", site.logs());
            let tried: Value = serde_json::from_str(
                &std::fs::read_to_string(site.out.join("connect.json")).expect("the probe wrote"),
            )
            .expect("its JSON");
            eprintln!("from the PR's network: {tried}");
            // The control: the probe reaches what is on its own network.
            assert_eq!(tried[&pr_target][0], "connected", "the PR's own server: {tried}");
            let outcome = tried[&base_target][0].as_str().unwrap_or_default();
            assert!(
                ["Network is unreachable", "timed out", "Connection refused", "No route to host"]
                    .iter()
                    .any(|refusal| outcome.contains(refusal)),
                "the PR's side reached base's server at {base_target}: {tried}"
            );
            let seconds = tried[&base_target][1].as_f64().unwrap_or(f64::MAX);
            assert!(seconds < 5.0, "the attempt took {seconds} s: {tried}");
        }

        for container in [base, pr] {
            let name = container.name().to_owned();
            drop(container);
            assert!(!harness.exists(&name), "the container is gone");
        }
        let mut removed = harness.engine.remove_run_networks(&run).expect("removed");
        removed.sort();
        assert_eq!(removed, [base_network, pr_network], "both sides' networks are removed");
    });
}

/// While it lives, the node's firewall lets new connections from podman's bridges to one port
/// of the host through (`iptables -I INPUT -i podman+ -p tcp --dport PORT -j ACCEPT`, ahead
/// of `.ci/engine-up`'s DROP). Only that port: the one a listener of the test holds, so that
/// tests running at the same time (which check that nothing else answers) see no change.
struct FirewallHole {
    rule: Vec<String>,
}

impl FirewallHole {
    fn open(port: u16) -> FirewallHole {
        let rule = strings(&[
            "INPUT",
            "-i",
            "podman+",
            "-p",
            "tcp",
            "--dport",
            &port.to_string(),
            "-j",
            "ACCEPT",
        ]);
        let status =
            Command::new("iptables").arg("-I").args(&rule).status().expect("iptables runs");
        assert!(status.success(), "iptables -I {rule:?}: {status}");
        FirewallHole { rule }
    }
}

impl Drop for FirewallHole {
    fn drop(&mut self) {
        let _status = Command::new("iptables").arg("-D").args(&self.rule).status();
    }
}

#[test]
fn the_gateway_check_finds_the_host_closed_and_a_host_that_answers_open() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("gateway");
        let _cleanup = RunCleanup { engine: &harness.engine, run: &run };
        let network =
            harness.engine.create_side_network(&run, NetworkSide::Pr).expect("the PR's network");
        let env = ContainerEnv::new(&node);
        let log = site.log("gateway-probe");
        let request = ContainerRequest {
            node: &node,
            run: &run,
            purpose: "gateway-probe",
            labels: &[],
            gpus: &[],
            tree: &site.tree,
            out: &site.out,
            env: &env,
            network: ContainerNetwork::Side(NetworkSide::Pr),
            datasets: None,
            shm_gib: DEFAULT_SHM_GIB,
            command: &[],
            log: &log,
            grace: Duration::from_secs(2),
        };
        let gateway = harness.engine.network_gateway(&network).expect("the network's gateway");
        if harness.real() {
            assert_eq!(gateway.to_string(), self::gateway(harness, &network));
        }

        // What was at the probe's log (here a link to a host file) is removed, not followed.
        let host_file = site.root().join("host-file");
        std::fs::write(&host_file, "prgate-probe:connected\n").expect("a host file");
        std::fs::create_dir_all(log.parent().expect("a folder")).expect("the logs' folder");
        std::os::unix::fs::symlink(&host_file, &log).expect("a link");

        // The node's firewall drops new connections from a side's network to the host
        // (.ci/engine-up's rule on podman; the stand-in's default): the probe times out on
        // podman, and is refused on the stand-in (its commands run on the host).
        match harness.engine.check_gateway(&request).expect("the check tells") {
            GatewayCheck::Closed { gateway: probed, answer, .. } => {
                assert_eq!(probed, gateway);
                let expected =
                    if harness.real() { "no answer within 3s" } else { "Connection refused" };
                assert_eq!(answer, expected, "{}", site.logs());
            }
            open => panic!("{open}\n{}", site.logs()),
        }
        let untouched = std::fs::read_to_string(&host_file).expect("the host file");
        assert_eq!(untouched, "prgate-probe:connected\n");
        assert!(!log.is_symlink(), "the probe's log is its own file");

        // The host answers at one port of the gateway: on podman, a rule that lets that port
        // through (not the DROP rule removed: other tests run meanwhile); on the stand-in, its
        // `gateway-open` switch.
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("a host service");
        let port = listener.local_addr().expect("its address").port();
        let _hole = match &harness.stand_in {
            None => Some(FirewallHole::open(port)),
            Some(state) => {
                std::fs::write(state.join("gateway-open"), "").expect("the switch");
                None
            }
        };
        match harness.engine.probe_gateway(&request, gateway, listener).expect("the check tells") {
            GatewayCheck::Open { gateway: probed, port: at, how } => {
                assert_eq!((probed, at), (gateway, port));
                assert!(how.contains("accepted a connection from"), "{how}");
            }
            closed => panic!("{closed}\n{}", site.logs()),
        }
        // The probes' containers are gone.
        let name = prgate_runner::container::container_name(&run, "gateway-probe").expect("a name");
        assert!(!harness.exists(&name), "a probe is left");
    });
}
