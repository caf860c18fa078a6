//! The SMTP option of the outbox (issue 4): with `smtp_url` set, a booking's confirmation email
//! goes to a real SMTP server (Python's `aiosmtpd`, started here on a free port, writing what it
//! receives to a Maildir), exactly once per booking, and nothing is written to the mail directory.

mod support;

use sale_common::testsupport::free_port;
use sale_common::Clock;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::Harness;

/// `python3 -m aiosmtpd` with the Maildir handler, killed on drop.
struct SmtpServer {
    child: Child,
    port: u16,
    maildir: tempfile::TempDir,
}

impl SmtpServer {
    fn start() -> Self {
        let port = free_port();
        let maildir = tempfile::tempdir().expect("maildir");
        let child = Command::new("python3")
            .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(maildir.path().join("mbox"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "python3 -m aiosmtpd (pip install aiosmtpd; scripts/install-test-deps does it)",
            );
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "aiosmtpd did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            port,
            maildir,
        }
    }

    /// Every message file the server stored.
    fn messages(&self) -> Vec<String> {
        let mut out = Vec::new();
        for sub in ["new", "cur"] {
            let dir = self.maildir.path().join("mbox").join(sub);
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                out.push(std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        out
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmation_email_goes_out_over_smtp_exactly_once() {
    let smtp = SmtpServer::start();
    let url = format!("smtp://127.0.0.1:{}", smtp.port);
    let h = Harness::start_with(|c| {
        c.smtp_url = Some(url.clone());
        c.fan_mail_domain = "fans.test".into();
    })
    .await;
    let hold = h.buy("fan-smtp", "A-1-1").await;
    // Drive the outbox by hand, twice: the second step must not send again.
    let outbox = h.state.outbox();
    for _ in 0..2 {
        outbox.step(h.clock.now_ms()).await.expect("outbox step");
    }
    let msgs = smtp.messages();
    let ours: Vec<&String> = msgs
        .iter()
        .filter(|m| m.contains("fan-smtp@fans.test"))
        .collect();
    assert_eq!(ours.len(), 1, "one confirmation email over SMTP: {msgs:?}");
    assert!(ours[0].contains("Your tickets are booked"), "{}", ours[0]);
    assert!(
        ours[0].contains(&hold),
        "the email names the booking's hold"
    );
    assert!(
        h.mail_files().is_empty(),
        "nothing written to the mail directory"
    );
}

#[tokio::test]
async fn an_unusable_smtp_url_is_refused_at_start_up() {
    let mut c = booking_core::Config::demo(
        "demo",
        "http://127.0.0.1:1/jwks",
        "http://127.0.0.1:1",
        sale_common::Secret::new("s"),
        "http://127.0.0.1:2",
    );
    c.smtp_url = Some("not a url".into());
    let err = c.validate().expect_err("refused");
    assert!(err.to_string().contains("smtp_url"), "{err}");
}
