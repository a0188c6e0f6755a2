//! Gateway and worker processes, for the tests that need a real process: signals, exit codes,
//! command-line flags, and what the process writes to stdout and stderr.
//!
//! The binaries of other packages are not built for this crate's tests (`CARGO_BIN_EXE_*`
//! names only a package's own), so each process is this test binary re-run as a child that
//! executes its binary's own `main` code (`seckill_gateway::cli::run`,
//! `seckill_worker::cli::run`), signal handling and exit codes included. The child's libtest
//! harness writes a few lines of its own to stdout; both programs write their logs to stderr.
//! The worker child marks where its own stdout starts (see [`worker_stdout`]), since its
//! tests read that stdout whole.

use crate::helpers::*;
use clap::Parser;
use serde_json::Value;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

const CHILD: &str = "SECKILL_E2E_GATEWAY_CHILD";
/// The gateway child's command-line arguments, separated by spaces.
const CHILD_ARGS: &str = "SECKILL_E2E_GATEWAY_ARGS";
const WORKER_CHILD: &str = "SECKILL_E2E_WORKER_CHILD";
/// The worker child's command-line arguments, separated by U+001F (a path may hold a space).
const WORKER_CHILD_ARGS: &str = "SECKILL_E2E_WORKER_ARGS";
const WORKER_ARGS_SEPARATOR: char = '\u{1f}';
/// The line the worker child writes to stdout before the worker runs: what came before it is
/// the harness's.
const WORKER_STDOUT_STARTS: &str = "--- seckill-e2e: the worker's stdout starts here ---";

/// Not a test: the body of a gateway child process.
#[test]
#[ignore = "run by the process tests as their gateway process"]
fn gateway_process() {
    use seckill_gateway::cli::{run, Cli};
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let args = std::env::var(CHILD_ARGS).unwrap_or_default();
    let argv = std::iter::once("gateway").chain(args.split_whitespace());
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Err(e) = rt.block_on(run(Cli::parse_from(argv))) {
        eprintln!("gateway: {e:#}");
        std::process::exit(1);
    }
}

/// Not a test: the body of a worker child process, with the exit codes of `worker/src/main.rs`.
#[test]
#[ignore = "run by the process tests as their worker process"]
fn worker_process() {
    use seckill_worker::cli::{run, Cli};
    use std::io::Write;
    if std::env::var_os(WORKER_CHILD).is_none() {
        return;
    }
    let args = std::env::var(WORKER_CHILD_ARGS).unwrap_or_default();
    let argv = std::iter::once("worker")
        .chain(args.split(WORKER_ARGS_SEPARATOR).filter(|a| !a.is_empty()));
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "\n{WORKER_STDOUT_STARTS}").unwrap();
        out.flush().unwrap();
    }
    let cli = Cli::parse_from(argv);
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Err(e) = rt.block_on(run(cli)) {
        eprintln!("worker: {e:#}");
        std::process::exit(1);
    }
    // As the binary does: not a return (dropping the runtime could wait on librdkafka).
    std::process::exit(0);
}

/// A worker process (this test binary re-run as [`worker_process`]) with `args` on its
/// command line, its stdout and stderr inherited unless set.
pub fn worker_std_command(args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.arg("process::worker_process")
        .args(HARNESS_ARGS)
        .env(WORKER_CHILD, "1")
        .env(
            WORKER_CHILD_ARGS,
            args.join(&WORKER_ARGS_SEPARATOR.to_string()),
        );
    cmd
}

/// The child's libtest arguments that run exactly one ignored test, in the foreground.
const HARNESS_ARGS: [&str; 5] = ["--exact", "--ignored", "--nocapture", "--test-threads", "1"];

/// What a worker child wrote to stdout, without the harness's lines before it.
pub fn worker_stdout(stdout: &str) -> &str {
    match stdout.find(WORKER_STDOUT_STARTS) {
        Some(at) => stdout[at + WORKER_STDOUT_STARTS.len()..]
            .strip_prefix('\n')
            .unwrap_or(""),
        None => stdout,
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn output() -> Stdio {
    if std::env::var_os("TEST_LOG").is_some() {
        Stdio::inherit()
    } else {
        Stdio::null()
    }
}

/// The lines a process writes to one pipe, collected as they come.
struct Lines {
    lines: Arc<Mutex<Vec<String>>>,
    reader: JoinHandle<()>,
}

impl Lines {
    fn collect(pipe: impl AsyncRead + Unpin + Send + 'static) -> Self {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = tokio::spawn(async move {
            let mut pipe = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = pipe.next_line().await {
                if std::env::var_os("TEST_LOG").is_some() {
                    eprintln!("{line}");
                }
                sink.lock().unwrap().push(line);
            }
        });
        Self { lines, reader }
    }

    fn now(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Every line, once the pipe is closed.
    async fn all(self) -> Vec<String> {
        tokio::time::timeout(Duration::from_secs(10), self.reader)
            .await
            .expect("the pipe closes when the process exits")
            .unwrap();
        Arc::try_unwrap(self.lines).unwrap().into_inner().unwrap()
    }
}

/// A worker child's stdout lines after its marker (see [`worker_stdout`]); any other
/// process's as they are.
fn without_harness(lines: Vec<String>) -> Vec<String> {
    match lines.iter().position(|l| l == WORKER_STDOUT_STARTS) {
        Some(at) => lines[at + 1..].to_vec(),
        None => lines,
    }
}

/// How a process ended, and everything it wrote.
pub struct Exited {
    pub status: ExitStatus,
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
}

pub struct Proc {
    pub child: Child,
    pub base: String,
    stdout: Option<Lines>,
    stderr: Option<Lines>,
}

impl Proc {
    /// A gateway process of `env`'s namespace on a free port, with `args` on its command
    /// line. Add environment variables to the command before [`Proc::spawn`].
    pub fn gateway_command(env: &TestEnv, args: &[&str]) -> (Command, u16) {
        let port = free_port();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg("process::gateway_process")
            .args(HARNESS_ARGS)
            .envs(env.process_env())
            .env(CHILD, "1")
            .env(CHILD_ARGS, args.join(" "))
            .env("SECKILL_HTTP_ADDR", format!("127.0.0.1:{port}"));
        (cmd, port)
    }

    /// A worker process (see [`worker_process`]) of `env`'s namespace with its health listener
    /// on a free port.
    pub fn worker_command(env: &TestEnv, args: &[&str]) -> (Command, u16) {
        let port = free_port();
        let mut cmd = Command::from(worker_std_command(args));
        cmd.envs(env.process_env())
            .env("SECKILL_WORKER_HTTP_ADDR", format!("127.0.0.1:{port}"));
        (cmd, port)
    }

    /// Starts `cmd`, whose HTTP listener is on `port`. With `capture`, what it writes to
    /// stdout and stderr is collected (see [`Proc::stderr_now`] and [`Proc::exit`]); without,
    /// it is dropped (shown with `TEST_LOG`).
    pub fn spawn(mut cmd: Command, port: u16, capture: bool) -> Self {
        if capture {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        } else {
            cmd.stdout(output()).stderr(output());
        }
        let mut child = cmd
            .kill_on_drop(true)
            .spawn()
            .expect("starting the process");
        let stdout = child.stdout.take().map(Lines::collect);
        let stderr = child.stderr.take().map(Lines::collect);
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            stdout,
            stderr,
        }
    }

    /// A gateway process, once it answers `/livez`.
    pub async fn gateway(env: &TestEnv, extra: &[(&str, &str)]) -> Self {
        let (mut cmd, port) = Self::gateway_command(env, &[]);
        cmd.envs(extra.iter().copied());
        let p = Self::spawn(cmd, port, false);
        p.wait_until(|v| v["status"] == "ok", "/livez").await;
        p
    }

    /// A worker process, once the consumer group has given it every partition.
    pub async fn worker(env: &TestEnv, extra: &[(&str, &str)]) -> Self {
        let (mut cmd, port) = Self::worker_command(env, &[]);
        cmd.envs(extra.iter().copied());
        let p = Self::spawn(cmd, port, false);
        let partitions = env.settings.kafka.partitions as usize;
        p.wait_until(
            |v| v["assigned_partitions"].as_array().map(Vec::len) == Some(partitions),
            "/healthz",
        )
        .await;
        p
    }

    pub async fn wait_until(&self, ok: impl Fn(&Value) -> bool, path: &str) {
        let http = reqwest::Client::new();
        let url = format!("{}{path}", self.base);
        eventually(&url, Duration::from_secs(60), || async {
            let body: Value = http.get(&url).send().await.ok()?.json().await.ok()?;
            ok(&body).then_some(())
        })
        .await
    }

    /// The stderr lines so far (the process must have been spawned with `capture`).
    pub fn stderr_now(&self) -> Vec<String> {
        self.stderr.as_ref().expect("spawned with capture").now()
    }

    pub fn sigterm(&self) {
        let pid = self.child.id().expect("still running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, at most `timeout`, and returns what it wrote (nothing
    /// unless spawned with `capture`).
    pub async fn exit(mut self, what: &str, timeout: Duration) -> Exited {
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{what} did not exit within {timeout:?}"))
            .unwrap();
        let stdout = match self.stdout.take() {
            Some(lines) => without_harness(lines.all().await),
            None => Vec::new(),
        };
        let stderr = match self.stderr.take() {
            Some(lines) => lines.all().await,
            None => Vec::new(),
        };
        Exited {
            status,
            stdout,
            stderr,
        }
    }

    /// Waits for the process to exit and asserts it exited 0.
    pub async fn exits_cleanly(self, what: &str) -> Exited {
        let exited = self.exit(what, Duration::from_secs(30)).await;
        assert!(
            exited.status.success(),
            "{what} exited with {}; stderr:\n{}",
            exited.status,
            exited.stderr.join("\n")
        );
        exited
    }

    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        crate::observability::sample(&text, name, labels).unwrap_or_else(|| {
            crate::helpers::assert_declared(&text, name);
            0.0
        })
    }
}
