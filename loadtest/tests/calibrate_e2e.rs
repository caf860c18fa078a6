//! CI-sized `loadtest calibrate`: a short ramp on the embedded defaults, then `--apply` on the
//! spawned event. Checks the arithmetic it prints (admit rate = sustainable holds/s ÷ hold
//! requests per fan; max_active = admit rate × mean session), that the ramp made real holds
//! (not only refusals: a released hold ends its admission, so a reused token measures 409s), and
//! that the waiting room answered the PATCH with the recommended figures.

use std::process::Command;

fn number_after(text: &str, label: &str) -> f64 {
    let rest = text
        .split(label)
        .nth(1)
        .unwrap_or_else(|| panic!("{label:?} missing in:\n{text}"));
    let n: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    n.parse()
        .unwrap_or_else(|_| panic!("no number after {label:?} in:\n{text}"))
}

#[test]
fn calibrate_prints_the_arithmetic_and_applies_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["calibrate", "--step-secs", "1", "--fans", "3000"])
        .args(["--start-rate", "40", "--factor", "2", "--p99-ms", "400"])
        .args(["--holds-per-fan", "2", "--session-secs", "30", "--apply"])
        .output()
        .expect("run loadtest calibrate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "calibrate failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let sustainable = number_after(&stdout, "sustainable holds/s:");
    assert!(sustainable >= 40.0, "{stdout}");
    // The first step at 40/s on a fresh 100-seat block makes holds, not only refusals.
    let first_step = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("offered"))
        .unwrap_or_else(|| panic!("no step printed:\n{stdout}"));
    let first_held = number_after(first_step, "(");
    assert!(
        first_held > 0.0,
        "no hold made in the first step:\n{stdout}"
    );
    let admit = number_after(&stdout, "hold requests per fan =");
    assert!((admit - sustainable / 2.0).abs() < 1.0, "{stdout}");
    let max_active = number_after(&stdout, "mean session =");
    // `admit` is printed to 0.1 (± 0.05 × 30 s) and max_active is rounded up (+ 1).
    assert!((max_active - admit * 30.0).abs() <= 2.5, "{stdout}");
    let applied = stdout
        .lines()
        .find(|l| l.starts_with("applied to"))
        .unwrap_or_else(|| panic!("not applied:\n{stdout}"));
    assert!(applied.contains("200 OK"), "{applied}");
    assert!(
        applied.contains(&format!("max_active {max_active}")),
        "{applied} vs {max_active}"
    );
}
